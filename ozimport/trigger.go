package ozimport

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Trigger is one entry of a triggers/*.json file, keyed by its ID.
type Trigger struct {
	ID          string          `json:"-"`
	File        string          `json:"-"`
	Name        string          `json:"name"`
	TriggerType string          `json:"trigger_type"`
	Config      json.RawMessage `json:"config"`

	slack    *slackConfig
	discord  *discordConfig
	telegram *telegramConfig
	email    *emailConfig
	webhook  *webhookConfig
	script   *scriptConfig
}

// Message is a trigger's title and body template.
type Message struct {
	Title string `json:"title"`
	Body  string `json:"body"`
}

type slackConfig struct {
	SlackURL    SecretValue     `json:"slack_url"`
	Message     Message         `json:"message"`
	RetryPolicy json.RawMessage `json:"retry_policy"`
}

type discordConfig struct {
	DiscordURL  SecretValue     `json:"discord_url"`
	Message     Message         `json:"message"`
	RetryPolicy json.RawMessage `json:"retry_policy"`
}

type telegramConfig struct {
	Token             SecretValue     `json:"token"`
	ChatID            string          `json:"chat_id"`
	DisableWebPreview *bool           `json:"disable_web_preview"`
	Message           Message         `json:"message"`
	RetryPolicy       json.RawMessage `json:"retry_policy"`
}

type emailConfig struct {
	Host        string          `json:"host"`
	Port        *uint16         `json:"port"`
	Username    SecretValue     `json:"username"`
	Password    SecretValue     `json:"password"`
	Message     Message         `json:"message"`
	Sender      string          `json:"sender"`
	Recipients  []string        `json:"recipients"`
	RetryPolicy json.RawMessage `json:"retry_policy"`
}

type webhookConfig struct {
	URL         SecretValue       `json:"url"`
	Method      string            `json:"method"`
	Secret      *SecretValue      `json:"secret"`
	Headers     map[string]string `json:"headers"`
	Message     *Message          `json:"message"`
	PayloadMode string            `json:"payload_mode"`
	RetryPolicy json.RawMessage   `json:"retry_policy"`
}

type scriptConfig struct {
	Language   string   `json:"language"`
	ScriptPath string   `json:"script_path"`
	Arguments  []string `json:"arguments"`
	TimeoutMS  uint32   `json:"timeout_ms"`
}

// retryPolicy is the part of Monitor's RetryConfig rflow maps.
type retryPolicy struct {
	MaxRetries *int `json:"max_retries"`
}

func parseTriggers(rel string, data []byte) ([]*Trigger, error) {
	var raw map[string]json.RawMessage
	if err := decodeStrict(rel, "", data, &raw); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(raw))
	for id := range raw {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]*Trigger, 0, len(ids))
	for _, id := range ids {
		t := &Trigger{ID: id, File: rel}
		if err := decodeStrict(rel, id, raw[id], t); err != nil {
			return nil, err
		}
		if err := t.parseConfig(); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func (t *Trigger) parseConfig() error {
	field := t.ID + ".config"
	var target any
	switch strings.ToLower(t.TriggerType) {
	case "slack":
		t.slack = &slackConfig{}
		target = t.slack
	case "discord":
		t.discord = &discordConfig{}
		target = t.discord
	case "telegram":
		t.telegram = &telegramConfig{}
		target = t.telegram
	case "email":
		t.email = &emailConfig{}
		target = t.email
	case "webhook":
		t.webhook = &webhookConfig{}
		target = t.webhook
	case "script":
		t.script = &scriptConfig{}
		target = t.script
	case "":
		return &InputError{File: t.File, Field: t.ID + ".trigger_type", Msg: "missing: want slack, discord, telegram, email, webhook or script"}
	default:
		return &InputError{File: t.File, Field: t.ID + ".trigger_type", Msg: fmt.Sprintf("%q: want slack, discord, telegram, email, webhook or script", t.TriggerType)}
	}
	if len(t.Config) == 0 {
		return &InputError{File: t.File, Field: field, Msg: "missing"}
	}
	if err := decodeStrict(t.File, field, t.Config, target); err != nil {
		return err
	}
	for f, s := range t.secrets() {
		if _, err := s.kind(); err != nil {
			return &InputError{File: t.File, Field: field + "." + f, Msg: err.Error()}
		}
	}
	return nil
}

// secrets returns the trigger's secret fields by config field name.
func (t *Trigger) secrets() map[string]SecretValue {
	switch {
	case t.slack != nil:
		return map[string]SecretValue{"slack_url": t.slack.SlackURL}
	case t.discord != nil:
		return map[string]SecretValue{"discord_url": t.discord.DiscordURL}
	case t.telegram != nil:
		return map[string]SecretValue{"token": t.telegram.Token}
	case t.email != nil:
		return map[string]SecretValue{"username": t.email.Username, "password": t.email.Password}
	case t.webhook != nil:
		m := map[string]SecretValue{"url": t.webhook.URL}
		if t.webhook.Secret != nil {
			m["secret"] = *t.webhook.Secret
		}
		return m
	}
	return nil
}

// retry maps Monitor's notification retry policy (default: 3 retries,
// exponential from 250 ms up to 10 s, full jitter) to rflow's retry:.
func retry(raw json.RawMessage) ymap {
	attempts := 4
	var p retryPolicy
	if len(raw) > 0 && json.Unmarshal(raw, &p) == nil && p.MaxRetries != nil && *p.MaxRetries >= 0 {
		attempts = *p.MaxRetries + 1
	}
	return ymap{}.add("max_attempts", attempts, "").
		add("backoff", "exponential", "").
		add("delay", "250ms", "").
		add("max_delay", "10s", "").
		add("jitter", true, "")
}

// convertTrigger returns the step that does what trigger t did, or nil
// (with a finding) when rflow has no equivalent.
func (b *builder) convertTrigger(m *Monitor, t *Trigger, tc *templateContext) ymap {
	id := stepID(t.ID)
	src := fmt.Sprintf("Monitor trigger %s (%s, %s in %s).", t.ID, t.Name, strings.ToLower(t.TriggerType), t.File)
	step := ymap{}.add("id", id, src)
	switch {
	case t.slack != nil:
		url := b.secretRef(t.slack.SlackURL, t.File, envName(t.ID)+"_SLACK_URL", "Slack webhook URL of trigger "+t.ID, true)
		text := tc.chat(t.slack.Message, m, t)
		return step.add("notify", ymap{}.add("slack", url, "").add("text", text, ""), "").
			add("retry", retry(t.slack.RetryPolicy), "Monitor's notification retry policy.")
	case t.discord != nil:
		url := b.secretRef(t.discord.DiscordURL, t.File, envName(t.ID)+"_DISCORD_URL", "Discord webhook URL of trigger "+t.ID, true)
		text := tc.chat(t.discord.Message, m, t)
		return step.add("notify", ymap{}.add("discord", url, "").add("text", text, ""), "").
			add("retry", retry(t.discord.RetryPolicy), "Monitor's notification retry policy.")
	case t.telegram != nil:
		return b.telegramStep(step, m, t, tc)
	case t.webhook != nil:
		return b.webhookStep(step, m, t, tc)
	case t.email != nil:
		b.leftOut(m, fmt.Sprintf("trigger %s: email to %s via %s", t.ID, strings.Join(t.email.Recipients, ", "), t.email.Host),
			"rflow sends no SMTP: add an http_call step to your mail provider's HTTP API (SendGrid, Mailgun, SES), or a webhook: notify to a relay that mails")
		return nil
	case t.script != nil:
		b.leftOut(m, fmt.Sprintf("trigger %s: script %s (%s)", t.ID, t.script.ScriptPath, t.script.Language),
			"rflow runs no scripts: serve the script's logic behind an HTTP endpoint and call it with an http_call step (it gets an Idempotency-Key, so it runs its effect once)")
		return nil
	}
	return nil
}

func (b *builder) telegramStep(step ymap, m *Monitor, t *Trigger, tc *templateContext) ymap {
	c := t.telegram
	token := b.secretRef(c.Token, t.File, envName(t.ID)+"_TELEGRAM_TOKEN", "Telegram bot token of trigger "+t.ID, false)
	b.notePlainSecret(c.Token, t, "bot token")
	body := ymap{}.add("chat_id", escapeText(c.ChatID), "").
		add("text", tc.telegram(c.Message, m, t), "").
		add("parse_mode", "MarkdownV2", "")
	if c.DisableWebPreview != nil {
		body = body.add("disable_web_page_preview", *c.DisableWebPreview, "")
	}
	call := ymap{}.add("method", "POST", "").
		add("url", "https://api.telegram.org/bot"+token+"/sendMessage", "").
		add("body", body, "Monitor's Telegram message: the title in bold, MarkdownV2 with its special characters escaped.")
	return step.add("http_call", call, "").add("retry", retry(c.RetryPolicy), "Monitor's notification retry policy.")
}

func (b *builder) webhookStep(step ymap, m *Monitor, t *Trigger, tc *templateContext) ymap {
	c := t.webhook
	url := b.secretRef(c.URL, t.File, envName(t.ID)+"_URL", "URL of webhook trigger "+t.ID, true)
	method := strings.ToUpper(c.Method)
	if method == "" {
		method = "POST"
	}
	call := ymap{}.add("method", method, "").add("url", url, "")
	if len(c.Headers) > 0 {
		keys := make([]string, 0, len(c.Headers))
		for k := range c.Headers {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		h := ymap{}
		for _, k := range keys {
			h = h.add(yamlKey(k), escapeText(c.Headers[k]), "") // Monitor sends header values as written
		}
		call = call.add("headers", h, "")
	}
	if strings.EqualFold(c.PayloadMode, "raw") {
		b.leftOut(m, fmt.Sprintf("trigger %s: payload_mode raw (the whole MonitorMatch as the body)", t.ID),
			"the step posts {monitor, event} instead (event: the decoded arguments plus block, block_hash, tx_hash, log_index and address); adapt the receiver")
		call = call.add("body", ymap{}.add("monitor", escapeText(m.Name), "").
			add("event", "${{ event }}", ""), "payload_mode raw: Monitor posted its whole match object; rflow posts the event.")
	} else {
		msg := Message{}
		if c.Message != nil {
			msg = *c.Message
		}
		call = call.add("body", ymap{}.add("title", tc.render(msg.Title, m, t, "message.title"), "").
			add("body", tc.render(msg.Body, m, t, "message.body"), ""), "Monitor's template payload: {\"title\": …, \"body\": …}.")
	}
	if c.Secret != nil {
		secret := b.secretRef(*c.Secret, t.File, envName(t.ID)+"_SECRET", "HMAC secret of webhook trigger "+t.ID, false)
		b.notePlainSecret(*c.Secret, t, "secret")
		call = call.add("hmac_secret", secret, "The webhook's secret signs each request: X-Rflow-Timestamp (unix seconds) and\nX-Rflow-Signature: sha256=hex(HMAC-SHA256(secret, timestamp + \".\" + body)).\nMonitor sent X-Signature over body + timestamp (ms): update the receiver's check.")
		b.note(t.File, m.Name, fmt.Sprintf("trigger %s: HMAC signature", t.ID),
			"rflow signs with X-Rflow-Timestamp and X-Rflow-Signature (sha256=hex(HMAC-SHA256(secret, timestamp + \".\" + body))) instead of Monitor's X-Signature/X-Timestamp; update the receiver's verification", false)
	}
	return step.add("http_call", call, "").add("retry", retry(c.RetryPolicy), "Monitor's notification retry policy.")
}

// notePlainSecret points out a secret the Monitor file held in plain text,
// which the project file now holds too.
func (b *builder) notePlainSecret(s SecretValue, t *Trigger, what string) {
	if k, _ := s.kind(); k == secretPlain {
		b.note(t.File, "", fmt.Sprintf("trigger %s: the %s is plain text in the Monitor file", t.ID, what),
			fmt.Sprintf("it is written into the workflow as is; move it to a variable (%s: \"${%s}\") and keep it out of version control", what, envName(t.ID)+"_"+envName(what)), false)
	}
}

// yamlKey quotes a mapping key unless it is a plain word.
func yamlKey(k string) string {
	for i := 0; i < len(k); i++ {
		if !isWordByte(k[i]) && k[i] != '-' {
			return scalar(k)
		}
	}
	if k == "" {
		return `""`
	}
	return k
}
