//! Shared by build.rs (which includes this file) and the library: the Rust compiler's
//! layout of the structs of mongoelector-sys's src/lib.rs, under bindgen's labels.
use std::fmt::Write as _;
use syn::{Expr, Fields, Item, Lit, Type};

/// For build.rs: Rust code of `fn rust_layout() -> Vec<(&'static str, usize)>` measuring
/// every non-opaque struct of `lib_rs` (as module `module`) with the labels bindgen's
/// layout tests use.
pub fn layout_code(lib_rs: &str, module: &str) -> Result<String, String> {
    let file = syn::parse_file(lib_rs).map_err(|e| format!("parse src/lib.rs: {e}"))?;
    let mut code =
        String::from("pub fn rust_layout() -> Vec<(&'static str, usize)> {\n    vec![\n");
    for item in &file.items {
        let Item::Struct(s) = item else { continue };
        let Fields::Named(fields) = &s.fields else {
            continue;
        };
        if is_opaque(&s.fields) {
            continue;
        }
        let t = s.ident.to_string();
        let _ = writeln!(
            code,
            "        (\"Size of {t}\", ::std::mem::size_of::<{module}::{t}>()),"
        );
        let _ = writeln!(
            code,
            "        (\"Alignment of {t}\", ::std::mem::align_of::<{module}::{t}>()),"
        );
        for f in &fields.named {
            let f = f.ident.as_ref().unwrap();
            let _ = writeln!(
                code,
                "        (\"Offset of field: {t}::{f}\", ::std::mem::offset_of!({module}::{t}, {f})),"
            );
        }
    }
    code += "    ]\n}\n";
    Ok(code)
}

pub(crate) fn is_opaque(fields: &Fields) -> bool {
    match fields {
        Fields::Named(f) if f.named.len() == 1 => {
            matches!(&f.named[0].ty, Type::Array(a) if matches!(&a.len, Expr::Lit(l) if lit_int(&l.lit) == Some(0)))
        }
        _ => false,
    }
}

pub(crate) fn lit_int(l: &Lit) -> Option<i128> {
    match l {
        Lit::Int(i) => i.base10_parse::<i128>().ok(),
        _ => None,
    }
}
