package workflow

import (
	"fmt"
	"maps"
	"slices"
)

// What a ${VAR} in a workflow definition may read.
//
// A definition from the project's own files is written by whoever runs
// rflow, so it reads the process environment, except for the variables
// that hold a credential: those resolve only in the field the credential
// configures (a wallet's private_key, a webhook's secret, an http_call's
// hmac_secret), never in a URL, a header, a body or a message, where a run
// would send them out. A definition deployed through the API is untrusted:
// it reads only the variables the project declares under env: (the rule of
// ${{ env.X }}), and its secret fields only the webhook and HMAC secrets the
// project's files already use.

// Origin says where a workflow definition came from.
type Origin int

const (
	// OriginFile is the project's own files (rflow start, rflow workflows
	// deploy).
	OriginFile Origin = iota
	// OriginAPI is PUT /v1/workflows/{name}.
	OriginAPI
)

// secretVar is an environment variable that holds a credential.
type secretVar struct {
	why string // "it holds wallet ops's private key"
	// signing: a workflow's webhook secret or HMAC secret, which another
	// secret field may use too.
	signing bool
	// fromFiles: declared by the project's files (not only by the
	// definition being compiled).
	fromFiles bool
}

// minSecretValueLen keeps short values ("1", "true") from matching a
// credential by chance in secretValueOf.
const minSecretValueLen = 8

// collectSecrets records the project's credential variables and values:
// the hidden ones, the webhook and HMAC secrets of the workflow definitions
// wfs, and refs: the project-level references envRefsIn found (database
// URL, wallets, API tokens).
func (l *loader) collectSecrets(refs map[string]string, wfs []*node) {
	secrets := map[string]secretVar{}
	for name, why := range hiddenEnv {
		secrets[name] = secretVar{why: why, fromFiles: true}
	}
	for name, what := range refs {
		secrets[name] = secretVar{why: "it holds " + what, fromFiles: true}
	}
	for _, wf := range wfs {
		signingRefs(wf, true, secrets)
	}
	l.p.secretVars = secrets

	values := map[string]string{}
	add := func(v, why string) {
		if len(v) >= minSecretValueLen {
			values[v] = why
		}
	}
	for _, w := range l.p.Wallets {
		add(w.PrivateKey.Reveal(), "wallet "+w.Name+"'s private key")
		add(w.Password.Reveal(), "wallet "+w.Name+"'s keystore password")
	}
	for _, t := range l.p.APITokens {
		add(t.Token.Reveal(), "API token "+t.Name)
	}
	full, _ := l.lookupEnv(FullAccessToken)
	add(full, "the command API's token")
	db, _ := l.lookupEnv("DATABASE_URL")
	add(db, "the database URL")
	add(l.p.DatabaseURL, "the database URL")
	l.p.secretValues = values
}

// signingRefs adds the ${VAR} names a workflow definition uses as webhook
// secret or HMAC secret to secrets.
func signingRefs(wf *node, fromFiles bool, secrets map[string]secretVar) {
	name := nameOf(wf)
	var walk func(n *node, parent string)
	walk = func(n *node, parent string) {
		if n == nil {
			return
		}
		for _, it := range n.items {
			walk(it, parent)
		}
		for _, e := range n.entries {
			var what string
			switch {
			case e.key == "hmac_secret":
				what = "an HMAC secret of workflow " + name
			case e.key == "secret" && parent == "webhook":
				what = "workflow " + name + "'s webhook secret"
			default:
				walk(e.value, e.key)
				continue
			}
			refs := map[string]string{}
			envRefsIn(e.value, what, refs)
			for v, what := range refs {
				if _, known := secrets[v]; !known {
					secrets[v] = secretVar{why: "it holds " + what, signing: true, fromFiles: fromFiles}
				}
			}
		}
	}
	walk(wf, "")
}

// definitionLoader is a loader for one definition of origin, outside Load:
// it knows the project's secrets and, for a definition from the files,
// the ones the definition itself declares.
func definitionLoader(p *Project, n *node, origin Origin) *loader {
	l := &loader{p: p, lookupEnv: p.lookupEnv, origin: origin}
	if l.lookupEnv == nil {
		l.lookupEnv = newLoader(nil).lookupEnv
	}
	l.secrets = maps.Clone(p.secretVars)
	if l.secrets == nil {
		l.secrets = map[string]secretVar{}
		for name, why := range hiddenEnv {
			l.secrets[name] = secretVar{why: why, fromFiles: true}
		}
	}
	if origin == OriginFile {
		signingRefs(n, false, l.secrets)
	}
	return l
}

// refused says why a workflow definition may not read ${name} in a field
// (secretField: a webhook secret or an hmac_secret), or "" when it may.
func (l *loader) refused(name string, secretField bool) string {
	if !l.inDefinition {
		return ""
	}
	sv, secret := l.secrets[name]
	switch {
	case secret && !secretField:
		return fmt.Sprintf("${%s} can never be interpolated into a workflow (%s): a secret is read only by the field it configures", name, sv.why)
	case secret && !sv.signing:
		return fmt.Sprintf("${%s} cannot sign or check requests (%s); give the webhook or HMAC secret a variable of its own", name, sv.why)
	case l.origin != OriginAPI:
		return ""
	case slices.Contains(l.p.Env, name), secret && sv.fromFiles:
		return ""
	case secretField:
		return fmt.Sprintf("${%s} is not a webhook or HMAC secret of %s's files nor declared under env:; a definition deployed through the API reads only those", name, l.p.fileName())
	default:
		return fmt.Sprintf("${%s} is not declared under env: in %s; a definition deployed through the API reads only the variables declared there", name, l.p.fileName())
	}
}

// secretValueOf names the credential whose value v is, or "".
func (p *Project) secretValueOf(v string) string {
	return p.secretValues[v]
}
