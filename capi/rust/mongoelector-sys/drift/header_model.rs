// A small model of a C header and of the hand-written Rust declarations, so that
// tests/header_drift.rs can compare them. Shared by build.rs (which generates the layout
// check from the header) and the test, via #[path]. Not a general C parser: it knows the
// shapes mongoelector.h uses (API functions, callback typedefs, structs, enums, defines)
// and fails loudly on anything else at top level, so a new shape cannot slip past.
#![allow(dead_code)]

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Func {
    pub ret: String,
    pub params: Vec<String>, // canonical C types, parameter names dropped
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Int(i64),
    Str(String),
}

#[derive(Debug, Default, Clone)]
pub struct Model {
    pub funcs: BTreeMap<String, Func>,
    pub fn_types: BTreeMap<String, Func>,
    /// struct name -> [(field, canonical type)]; opaque structs have no fields.
    pub structs: BTreeMap<String, Vec<(String, String)>>,
    pub opaque: Vec<String>,
    /// enum typedef names (C) / type aliases of integer types (Rust).
    pub enums: BTreeMap<String, String>,
    /// #define / enumerators (C), pub const (Rust).
    pub consts: BTreeMap<String, Value>,
}

// ---- tokens ------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Id(String),
    Num(i64),
    Str(String),
    P(char),
    Arrow, // ->
}

fn tokenize(s: &str) -> Result<Vec<Tok>, String> {
    let c: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch.is_ascii_alphabetic() || ch == '_' {
            let st = i;
            while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Tok::Id(c[st..i].iter().collect()));
        } else if ch.is_ascii_digit() {
            let st = i;
            while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let text: String = c[st..i].iter().collect();
            let digits = text.trim_end_matches(['u', 'U', 'l', 'L']);
            let digits = digits.split("_").collect::<String>();
            let n = if let Some(h) = digits.strip_prefix("0x") {
                i64::from_str_radix(h, 16)
            } else {
                digits.parse::<i64>()
            };
            out.push(Tok::Num(n.map_err(|e| format!("bad number {text}: {e}"))?));
        } else if ch == '"' {
            let st = i + 1;
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            out.push(Tok::Str(c[st..i.min(c.len())].iter().collect()));
            i += 1;
        } else if ch == '-' && i + 1 < c.len() && c[i + 1] == '>' {
            out.push(Tok::Arrow);
            i += 2;
        } else if "(){}[];,*=+<>:&!#'-".contains(ch) {
            out.push(Tok::P(ch));
            i += 1;
        } else {
            return Err(format!("unexpected character {ch:?}"));
        }
    }
    Ok(out)
}

fn strip_c_comments(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    loop {
        let block = rest.find("/*");
        let line = rest.find("//");
        match (block, line) {
            (Some(b), l) if l.map_or(true, |l| b < l) => {
                out.push_str(&rest[..b]);
                match rest[b..].find("*/") {
                    Some(e) => rest = &rest[b + e + 2..],
                    None => return out,
                }
                out.push(' ');
            }
            (_, Some(l)) => {
                out.push_str(&rest[..l]);
                match rest[l..].find('\n') {
                    Some(e) => rest = &rest[l + e..],
                    None => return out,
                }
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

// ---- constant expressions: + * ( ) integers, strings, names of earlier constants ----

fn eval(toks: &[Tok], consts: &BTreeMap<String, Value>) -> Result<Value, String> {
    fn sum(t: &[Tok], i: &mut usize, k: &BTreeMap<String, Value>) -> Result<Value, String> {
        let mut v = prod(t, i, k)?;
        while *i < t.len() && t[*i] == Tok::P('+') {
            *i += 1;
            let r = prod(t, i, k)?;
            v = match (v, r) {
                (Value::Int(a), Value::Int(b)) => Value::Int(a + b),
                _ => return Err("+ on strings".into()),
            };
        }
        Ok(v)
    }
    fn prod(t: &[Tok], i: &mut usize, k: &BTreeMap<String, Value>) -> Result<Value, String> {
        let mut v = atom(t, i, k)?;
        while *i < t.len() && t[*i] == Tok::P('*') {
            *i += 1;
            let r = atom(t, i, k)?;
            v = match (v, r) {
                (Value::Int(a), Value::Int(b)) => Value::Int(a * b),
                _ => return Err("* on strings".into()),
            };
        }
        Ok(v)
    }
    fn atom(t: &[Tok], i: &mut usize, k: &BTreeMap<String, Value>) -> Result<Value, String> {
        let tok = t.get(*i).ok_or("expression ends early")?.clone();
        *i += 1;
        match tok {
            Tok::Num(n) => Ok(Value::Int(n)),
            Tok::Str(s) => Ok(Value::Str(s)),
            Tok::Id(name) => k
                .get(&name)
                .cloned()
                .ok_or(format!("unknown constant {name}")),
            Tok::P('(') => {
                let v = sum(t, i, k)?;
                if t.get(*i) != Some(&Tok::P(')')) {
                    return Err("missing )".into());
                }
                *i += 1;
                Ok(v)
            }
            other => Err(format!("unexpected {other:?} in expression")),
        }
    }
    let mut i = 0;
    let v = sum(toks, &mut i, consts)?;
    if i != toks.len() {
        return Err(format!("trailing tokens in expression: {:?}", &toks[i..]));
    }
    Ok(v)
}

// ---- C ---------------------------------------------------------------------------

/// Canonical C type from declaration tokens (name already removed): "const char**",
/// "mongoelector_client**", "char[64]", "int".
fn c_type(toks: &[Tok], array: Option<i64>) -> Result<String, String> {
    let mut base_const = false;
    let mut base: Vec<String> = Vec::new();
    let mut ptrs = String::new();
    for t in toks {
        match t {
            Tok::Id(id) if id == "const" => {
                if ptrs.is_empty() {
                    base_const = true;
                } else {
                    ptrs.push_str("const");
                }
            }
            Tok::Id(id) if id == "struct" || id == "enum" => {}
            Tok::Id(id) => {
                if !ptrs.is_empty() {
                    return Err(format!("identifier {id} after '*'"));
                }
                base.push(id.clone());
            }
            Tok::P('*') => ptrs.push('*'),
            other => return Err(format!("unexpected {other:?} in a type")),
        }
    }
    if base.is_empty() {
        return Err("type without a name".into());
    }
    let mut s = if base_const {
        format!("const {}", base.join(" "))
    } else {
        base.join(" ")
    };
    s.push_str(&ptrs);
    if let Some(n) = array {
        s.push_str(&format!("[{n}]"));
    }
    Ok(s)
}

/// One declaration "type name" or "type name[N]" or an unnamed "type".
fn c_decl(toks: &[Tok], consts: &BTreeMap<String, Value>) -> Result<(String, String), String> {
    let mut toks = toks.to_vec();
    let mut array = None;
    if toks.last() == Some(&Tok::P(']')) {
        let open = toks
            .iter()
            .rposition(|t| *t == Tok::P('['))
            .ok_or("unbalanced [")?;
        array = match eval(&toks[open + 1..toks.len() - 1], consts)? {
            Value::Int(n) => Some(n),
            Value::Str(_) => return Err("string array size".into()),
        };
        toks.truncate(open);
    }
    // "type name": the last token is an identifier other than a qualifier. (An unnamed
    // multi-word type such as "unsigned int" would be misread; the header has none.)
    let named = toks.len() >= 2 && matches!(toks.last(), Some(Tok::Id(id)) if id != "const");
    let (name, ty) = if named {
        match toks.pop() {
            Some(Tok::Id(n)) => (n, toks),
            _ => unreachable!(),
        }
    } else {
        (String::new(), toks)
    };
    Ok((name, c_type(&ty, array)?))
}

fn split_top(toks: &[Tok], sep: char) -> Vec<Vec<Tok>> {
    let mut out = vec![Vec::new()];
    let mut depth = 0;
    for t in toks {
        match t {
            Tok::P('(') | Tok::P('{') | Tok::P('[') => depth += 1,
            Tok::P(')') | Tok::P('}') | Tok::P(']') => depth -= 1,
            _ => {}
        }
        if depth == 0 && *t == Tok::P(sep) {
            out.push(Vec::new());
        } else {
            out.last_mut().unwrap().push(t.clone());
        }
    }
    out.retain(|v| !v.is_empty());
    out
}

fn c_params(toks: &[Tok], consts: &BTreeMap<String, Value>) -> Result<Vec<String>, String> {
    if toks.len() == 1 && toks[0] == Tok::Id("void".into()) {
        return Ok(vec![]);
    }
    split_top(toks, ',')
        .iter()
        .map(|p| c_decl(p, consts).map(|(_, t)| t))
        .collect()
}

fn find(toks: &[Tok], t: &Tok) -> Option<usize> {
    toks.iter().position(|x| x == t)
}

/// Parses the header text.
pub fn parse_c(header: &str) -> Result<Model, String> {
    let text = strip_c_comments(header);
    let mut m = Model::default();
    // Preprocessor: keep #defines with a value, drop `#ifdef __cplusplus` blocks.
    let mut body = String::new();
    let mut skip: Vec<bool> = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut line = line.to_string();
        while line.trim_end().ends_with('\\') {
            let l = line.trim_end().trim_end_matches('\\').to_string();
            line = l + " " + lines.next().unwrap_or("");
        }
        let t = line.trim();
        if let Some(d) = t.strip_prefix('#') {
            let d = d.trim();
            let word = d.split_whitespace().next().unwrap_or("");
            match word {
                "ifdef" | "ifndef" | "if" => skip.push(d.contains("__cplusplus")),
                "elif" | "else" => {}
                "endif" => {
                    skip.pop();
                }
                "define" if !skip.iter().any(|s| *s) => {
                    let rest = d["define".len()..].trim();
                    let (name, value) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                    let value = value.trim();
                    if !value.is_empty() && !name.contains('(') && name != "MONGOELECTOR_API" {
                        let v = eval(&tokenize(value)?, &m.consts)
                            .map_err(|e| format!("#define {name}: {e}"))?;
                        m.consts.insert(name.to_string(), v);
                    }
                }
                _ => {}
            }
            continue;
        }
        if !skip.iter().any(|s| *s) {
            body.push_str(&line);
            body.push('\n');
        }
    }
    let toks = tokenize(&body)?;
    for stmt in split_top(&toks, ';') {
        parse_c_stmt(&stmt, &mut m).map_err(|e| format!("{e} in: {}", render(&stmt)))?;
    }
    Ok(m)
}

fn render(t: &[Tok]) -> String {
    t.iter()
        .map(|t| match t {
            Tok::Id(s) => s.clone(),
            Tok::Num(n) => n.to_string(),
            Tok::Str(s) => format!("{s:?}"),
            Tok::P(c) => c.to_string(),
            Tok::Arrow => "->".into(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn id(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Id(s)) => Some(s),
        _ => None,
    }
}

fn parse_c_stmt(s: &[Tok], m: &mut Model) -> Result<(), String> {
    match id(s.first()) {
        Some("typedef") => {
            let kind = id(s.get(1));
            if kind == Some("enum") {
                let open = find(s, &Tok::P('{')).ok_or("enum without body")?;
                let close = s
                    .iter()
                    .rposition(|t| *t == Tok::P('}'))
                    .ok_or("enum without }")?;
                let name = id(s.get(close + 1))
                    .ok_or("enum typedef without a name")?
                    .to_string();
                let mut next = 0i64;
                for item in split_top(&s[open + 1..close], ',') {
                    let ename = id(item.first()).ok_or("bad enumerator")?.to_string();
                    if item.len() > 1 {
                        if item[1] != Tok::P('=') {
                            return Err(format!("bad enumerator {ename}"));
                        }
                        next = match eval(&item[2..], &m.consts)? {
                            Value::Int(n) => n,
                            _ => return Err("string enumerator".into()),
                        };
                    }
                    m.consts.insert(ename, Value::Int(next));
                    next += 1;
                }
                m.enums.insert(name, "int".into());
                Ok(())
            } else if kind == Some("struct") {
                if let Some(open) = find(s, &Tok::P('{')) {
                    let close = s
                        .iter()
                        .rposition(|t| *t == Tok::P('}'))
                        .ok_or("struct without }")?;
                    let name = id(s.get(close + 1))
                        .ok_or("struct typedef without a name")?
                        .to_string();
                    let mut fields = Vec::new();
                    for f in split_top(&s[open + 1..close], ';') {
                        let (fname, ty) = c_decl(&f, &m.consts)?;
                        if fname.is_empty() {
                            return Err("unnamed field".into());
                        }
                        fields.push((fname, ty));
                    }
                    m.structs.insert(name, fields);
                } else {
                    let name = id(s.last()).ok_or("bad opaque typedef")?.to_string();
                    m.opaque.push(name);
                }
                Ok(())
            } else if let Some(p) = find(s, &Tok::P('(')) {
                // typedef RET (*NAME)(PARAMS)
                if s.get(p + 1) != Some(&Tok::P('*')) {
                    return Err("only function pointer typedefs are understood".into());
                }
                let name = id(s.get(p + 2))
                    .ok_or("function pointer typedef without a name")?
                    .to_string();
                let ret = c_type(&s[1..p], None)?;
                let params = &s[p + 5..s.len() - 1];
                m.fn_types.insert(
                    name,
                    Func {
                        ret,
                        params: c_params(params, &m.consts)?,
                    },
                );
                Ok(())
            } else {
                Err("unknown typedef".into())
            }
        }
        Some("MONGOELECTOR_API") => {
            let p = find(s, &Tok::P('(')).ok_or("API declaration without (")?;
            let name = id(s.get(p - 1))
                .ok_or("API declaration without a name")?
                .to_string();
            if s.last() != Some(&Tok::P(')')) {
                return Err("API declaration must end with )".into());
            }
            let ret = c_type(&s[1..p - 1], None)?;
            let params = c_params(&s[p + 1..s.len() - 1], &m.consts)?;
            if m.funcs.insert(name.clone(), Func { ret, params }).is_some() {
                return Err(format!("{name} declared twice"));
            }
            Ok(())
        }
        _ => Err("unknown top-level declaration".into()),
    }
}

// ---- Rust ---------------------------------------------------------------------------

fn rust_base(name: &str) -> String {
    match name {
        "c_char" => "char".into(),
        "c_int" => "int".into(),
        "i8" => "int8_t".into(),
        "i32" => "int32_t".into(),
        "c_uint" => "unsigned int".into(),
        "c_long" => "long".into(),
        "c_double" | "f64" => "double".into(),
        "c_float" | "f32" => "float".into(),
        "c_void" => "void".into(),
        "u8" => "uint8_t".into(),
        "u16" => "uint16_t".into(),
        "u32" => "uint32_t".into(),
        "u64" => "uint64_t".into(),
        "i16" => "int16_t".into(),
        "i64" => "int64_t".into(),
        "usize" => "size_t".into(),
        "isize" => "ptrdiff_t".into(),
        other => other.into(),
    }
}

/// Canonical C type of a Rust type (tokens), as c_type() writes it.
fn rust_type(t: &[Tok], consts: &BTreeMap<String, Value>) -> Result<String, String> {
    match t.first() {
        Some(Tok::P('*')) => {
            let (is_const, rest) = match id(t.get(1)) {
                Some("const") => (true, &t[2..]),
                Some("mut") => (false, &t[2..]),
                _ => return Err("raw pointer without const/mut".into()),
            };
            let inner = rust_type(rest, consts)?;
            let inner = if !is_const {
                inner
            } else if inner.ends_with('*') {
                inner + "const"
            } else {
                format!("const {inner}")
            };
            Ok(inner + "*")
        }
        Some(Tok::P('[')) => {
            let semi = find(t, &Tok::P(';')).ok_or("array without ;")?;
            let n = match eval(&t[semi + 1..t.len() - 1], consts)? {
                Value::Int(n) => n,
                _ => return Err("string array size".into()),
            };
            Ok(format!("{}[{n}]", rust_type(&t[1..semi], consts)?))
        }
        Some(Tok::Id(_)) => {
            // a path such as std::os::raw::c_int: the last segment names the type
            let last = t.iter().rev().find_map(|x| id(Some(x))).unwrap();
            if t.iter().any(|x| matches!(x, Tok::P('<'))) {
                return Err(format!("generic type {} not understood here", render(t)));
            }
            Ok(rust_base(last))
        }
        _ => Err(format!("bad type {}", render(t))),
    }
}

fn rust_fn(params: &[Tok], ret: &[Tok], consts: &BTreeMap<String, Value>) -> Result<Func, String> {
    let mut ps = Vec::new();
    for p in split_top(params, ',') {
        let colon = find(&p, &Tok::P(':')).ok_or("parameter without a type")?;
        ps.push(rust_type(&p[colon + 1..], consts)?);
    }
    let ret = if ret.is_empty() {
        "void".to_string()
    } else {
        rust_type(ret, consts)?
    };
    Ok(Func { ret, params: ps })
}

/// Splits `fn name(params) -> ret` starting at the token after `fn`.
fn fn_parts(s: &[Tok]) -> Result<(&[Tok], &[Tok]), String> {
    let open = find(s, &Tok::P('(')).ok_or("fn without (")?;
    let mut depth = 0;
    let mut close = open;
    for (i, t) in s.iter().enumerate().skip(open) {
        match t {
            Tok::P('(') => depth += 1,
            Tok::P(')') => {
                depth -= 1;
                if depth == 0 {
                    close = i;
                    break;
                }
            }
            _ => {}
        }
    }
    let ret = if s.get(close + 1) == Some(&Tok::Arrow) {
        &s[close + 2..]
    } else {
        &s[close + 1..close + 1]
    };
    Ok((&s[open + 1..close], ret))
}

fn strip_rust(src: &str) -> String {
    // Line comments, doc comments and attributes carry no declarations.
    src.lines()
        .map(|l| {
            let l = match l.find("//") {
                Some(i) => &l[..i],
                None => l,
            };
            if l.trim_start().starts_with("#") {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Parses the declarations of mongoelector-sys/src/lib.rs.
pub fn parse_rust(src: &str) -> Result<Model, String> {
    let toks = tokenize(&strip_rust(src))?;
    let mut m = Model::default();
    let mut i = 0;
    while i < toks.len() {
        // `use` lines
        if id(toks.get(i)) == Some("use") {
            while toks.get(i) != Some(&Tok::P(';')) {
                i += 1;
            }
            i += 1;
            continue;
        }
        if id(toks.get(i)) == Some("extern") {
            let open = i + find(&toks[i..], &Tok::P('{')).ok_or("extern without {")?;
            let close = open + find(&toks[open..], &Tok::P('}')).ok_or("extern without }")?;
            for decl in split_top(&toks[open + 1..close], ';') {
                let f = find(&decl, &Tok::Id("fn".into())).ok_or("extern item that is not a fn")?;
                let name = id(decl.get(f + 1)).ok_or("fn without a name")?.to_string();
                let (params, ret) = fn_parts(&decl[f..])?;
                m.funcs.insert(name, rust_fn(params, ret, &m.consts)?);
            }
            i = close + 1;
            continue;
        }
        let item_end = |from: usize| -> Result<usize, String> {
            // items end at ';' or at the '}' closing their body
            let mut depth = 0;
            for (j, t) in toks.iter().enumerate().skip(from) {
                match t {
                    Tok::P('{') => depth += 1,
                    Tok::P('}') => {
                        depth -= 1;
                        if depth == 0 {
                            return Ok(j);
                        }
                    }
                    Tok::P(';') if depth == 0 => return Ok(j),
                    _ => {}
                }
            }
            Err("unterminated item".into())
        };
        let end = item_end(i)?;
        let item = &toks[i..end];
        let kw = item
            .iter()
            .position(|t| matches!(id(Some(t)), Some("const" | "type" | "struct")))
            .ok_or(format!("unknown item: {}", render(item)))?;
        let name = id(item.get(kw + 1))
            .ok_or("item without a name")?
            .to_string();
        match id(item.get(kw)).unwrap() {
            "const" => {
                let eq = find(item, &Tok::P('=')).ok_or("const without =")?;
                let v =
                    eval(&item[eq + 1..], &m.consts).map_err(|e| format!("const {name}: {e}"))?;
                m.consts.insert(name, v);
            }
            "type" => {
                let rhs = &item[find(item, &Tok::P('=')).ok_or("type without =")? + 1..];
                if id(rhs.first()) == Some("Option") {
                    // Option<unsafe extern "C" fn(...) -> R>
                    let f = find(rhs, &Tok::Id("fn".into()))
                        .ok_or("Option of something else than fn")?;
                    let inner = &rhs[f..rhs.len() - 1];
                    let (params, ret) = fn_parts(inner)?;
                    m.fn_types.insert(name, rust_fn(params, ret, &m.consts)?);
                } else {
                    m.enums.insert(name, rust_type(rhs, &m.consts)?);
                }
            }
            "struct" => {
                let open = find(item, &Tok::P('{')).ok_or("struct without body")?;
                let mut fields = Vec::new();
                for f in split_top(&toks[i + open + 1..end], ',') {
                    let colon = find(&f, &Tok::P(':')).ok_or("field without type")?;
                    let fname = id(f.get(colon - 1))
                        .ok_or("field without name")?
                        .to_string();
                    fields.push((fname, rust_type(&f[colon + 1..], &m.consts)?));
                }
                if fields.len() == 1 && fields[0].0 == "_private" {
                    m.opaque.push(name);
                } else {
                    m.structs.insert(name, fields);
                }
            }
            _ => unreachable!(),
        }
        i = end + 1;
    }
    Ok(m)
}

// ---- comparison -------------------------------------------------------------------

fn sig(f: &Func) -> String {
    format!("{} ({})", f.ret, f.params.join(", "))
}

/// Pushes to `d` every `what` named in only one of the maps, or differing (shown by
/// `show`).
fn diff_maps<V: PartialEq>(
    d: &mut Vec<String>,
    what: &str,
    cm: &BTreeMap<String, V>,
    rm: &BTreeMap<String, V>,
    show: impl Fn(&V) -> String,
) {
    for (name, cv) in cm {
        match rm.get(name) {
            None => d.push(format!("{what} {name} is in the header but not in Rust")),
            Some(rv) if rv != cv => d.push(format!(
                "{what} {name}: header {} vs Rust {}",
                show(cv),
                show(rv)
            )),
            _ => {}
        }
    }
    for name in rm.keys().filter(|n| !cm.contains_key(*n)) {
        d.push(format!("{what} {name} is in Rust but not in the header"));
    }
}

/// Every difference between the header's model and the Rust one; empty when in sync.
pub fn compare(c: &Model, r: &Model) -> Vec<String> {
    let mut d = Vec::new();
    diff_maps(&mut d, "function", &c.funcs, &r.funcs, sig);
    diff_maps(&mut d, "callback type", &c.fn_types, &r.fn_types, sig);
    diff_maps(&mut d, "struct", &c.structs, &r.structs, |f| {
        format!("{f:?}")
    });
    let mut co = c.opaque.clone();
    let mut ro = r.opaque.clone();
    co.sort();
    ro.sort();
    if co != ro {
        d.push(format!("opaque types: header {co:?} vs Rust {ro:?}"));
    }
    for (name, ty) in &c.enums {
        match r.enums.get(name) {
            Some(rt) if rt == ty => {}
            other => d.push(format!("enum {name}: header {ty} vs Rust {other:?}")),
        }
    }
    diff_maps(&mut d, "constant", &c.consts, &r.consts, |v| {
        format!("{v:?}")
    });
    d
}
