package workflow

// A request body (http_call, notify) gives every value the ABI types as an
// integer one JSON type at every magnitude: a decimal string, 42 as "42"
// and 10^18 as "1000000000000000000", so a receiver never sees a field's
// type change with its size. Untyped numbers (literals, arithmetic,
// journaled step outputs) keep MarshalRequestJSON's rule: a JSON number
// within ±(2^53-1), a string beyond. The ABI's types are known where the
// body is compiled (the static types of its expressions), so evaluation
// itself is untouched: expressions compute with exact integers as before.

// EvalRequest is Eval for a request body: the integers the ABI types are
// decimal strings; encode the result with MarshalRequestJSON. text reports
// that the value itself is a string (an http_call sends that as text; a
// uint256 turned into its decimal string is not one).
func (v *Value) EvalRequest(env Env) (r any, text bool, err error) {
	if v != nil && v.kind == valueExpr {
		if r, err = v.expr.Eval(env); err != nil {
			return nil, false, err
		}
		_, text = r.(string)
		return abiIntsAsText(r, v.expr.typ, 0), text, nil
	}
	r, err = v.evalRequest(env)
	_, text = r.(string)
	return r, text, err
}

func (v *Value) evalRequest(env Env) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch v.kind {
	case valueExpr:
		r, err := v.expr.Eval(env)
		if err != nil {
			return nil, err
		}
		return abiIntsAsText(r, v.expr.typ, 0), nil
	case valueMap:
		out := make(map[string]any, len(v.keys))
		for _, k := range v.keys {
			r, err := v.m[k].evalRequest(env)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case valueList:
		out := make([]any, len(v.list))
		for i, e := range v.list {
			r, err := e.evalRequest(env)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v.Eval(env)
}

// abiIntsAsText returns r with each integer that t says the ABI typed
// replaced by its decimal text, copying what it changes (r may be part of
// the environment). Values t does not describe are left as they are.
func abiIntsAsText(r any, t *typ, depth int) any {
	if t == nil || depth > 1000 {
		return r
	}
	switch {
	case t.kind == tInt && t.abi:
		if n, ok := toNumber(r); ok && !n.isFloat {
			return n.i.String()
		}
	case t.kind == tObject:
		if m, ok := r.(map[string]any); ok {
			out := make(map[string]any, len(m))
			for k, e := range m {
				out[k] = abiIntsAsText(e, t.fields[k], depth+1)
			}
			return out
		}
	case t.kind == tList:
		if l, ok := r.([]any); ok {
			out := make([]any, len(l))
			for i, e := range l {
				out[i] = abiIntsAsText(e, t.elem, depth+1)
			}
			return out
		}
	case t.kind == tMap:
		if m, ok := r.(map[string]any); ok {
			out := make(map[string]any, len(m))
			for k, e := range m {
				out[k] = abiIntsAsText(e, t.elem, depth+1)
			}
			return out
		}
	}
	return r
}
