package workflow

// YAMLValue is a YAML value with its position, for the files rflow reads
// beside a project that are not workflows (workflow test fixtures). They
// go through the same hardened parser as project files (positions, alias
// and depth limits, exact integers, duplicate keys refused).
type YAMLValue struct {
	Pos Position
	// Fields are a mapping's entries in file order; nil for other kinds.
	Fields []YAMLField
	// Items are a list's values; nil for other kinds.
	Items []*YAMLValue
	// Scalar is a scalar's value: nil, bool, int64, *big.Int, float64 or
	// string.
	Scalar any
	// Quoted reports that a string scalar was written in quotes.
	Quoted bool

	n *node
}

// YAMLField is one key of a mapping YAMLValue.
type YAMLField struct {
	Key    string
	KeyPos Position
	Value  *YAMLValue
}

// IsMap reports whether v is a mapping.
func (v *YAMLValue) IsMap() bool { return v != nil && v.n.kind == nodeMap }

// IsList reports whether v is a list.
func (v *YAMLValue) IsList() bool { return v != nil && v.n.kind == nodeSeq }

// IsNull reports whether v is absent or null.
func (v *YAMLValue) IsNull() bool { return v == nil || v.n.isNull() }

// Get returns the value of key in a mapping, or nil.
func (v *YAMLValue) Get(key string) *YAMLValue {
	if v == nil {
		return nil
	}
	for _, f := range v.Fields {
		if f.Key == key {
			return f.Value
		}
	}
	return nil
}

// Describe names v's shape for error messages ("a mapping", "a string").
func (v *YAMLValue) Describe() string {
	if v == nil {
		return "nothing"
	}
	return v.n.describe()
}

// Plain returns v as plain data: map[string]any, []any, and scalars with
// numbers as json.Number (exact, whatever their size).
func (v *YAMLValue) Plain() any {
	if v == nil {
		return nil
	}
	return v.n.canonical()
}

// ParseYAMLValues parses src (YAML or JSON) into one YAMLValue per document. Syntax
// errors are diagnostics naming file:line:col.
func ParseYAMLValues(file string, src []byte) ([]*YAMLValue, Diagnostics) {
	docs, ds := parseYAML(file, src)
	if len(ds) > 0 {
		return nil, ds
	}
	out := make([]*YAMLValue, len(docs))
	for i, d := range docs {
		out[i] = valueOf(d)
	}
	return out, nil
}

func valueOf(n *node) *YAMLValue {
	v := &YAMLValue{Pos: n.pos, n: n}
	switch n.kind {
	case nodeMap:
		v.Fields = make([]YAMLField, len(n.entries))
		for i, e := range n.entries {
			v.Fields[i] = YAMLField{Key: e.key, KeyPos: e.keyPos, Value: valueOf(e.value)}
		}
	case nodeSeq:
		v.Items = make([]*YAMLValue, len(n.items))
		for i, it := range n.items {
			v.Items[i] = valueOf(it)
		}
	default:
		v.Scalar, v.Quoted = n.val, n.quoted
	}
	return v
}
