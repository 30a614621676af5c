//! The printer: every attribute and type written, so the text reads back
//! to the same graph.

use crate::attr::Attr;
use crate::graph::Graph;
use std::collections::HashMap;
use std::fmt::Write;

/// Print a graph in the text format.
pub fn print(g: &Graph) -> String {
    let mut s = String::new();
    print_graph(&mut s, g, 0);
    s
}

fn value_names(g: &Graph) -> Vec<String> {
    let mut seen = HashMap::new();
    for v in &g.values {
        if let Some(n) = &v.name {
            *seen.entry(n.as_str()).or_insert(0) += 1;
        }
    }
    g.values
        .iter()
        .enumerate()
        .map(|(i, v)| match &v.name {
            Some(n)
                if seen[n.as_str()] == 1
                    && is_name(n)
                    && !n.bytes().all(|b| b.is_ascii_digit()) =>
            {
                n.clone()
            }
            _ => i.to_string(),
        })
        .collect()
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

fn print_graph(s: &mut String, g: &Graph, indent: usize) {
    let names = value_names(g);
    let pad = "  ".repeat(indent);
    let params: Vec<String> = g
        .inputs
        .iter()
        .map(|&v| format!("%{}: {}", names[v.index()], g.ty(v)))
        .collect();
    let _ = writeln!(
        s,
        "graph @{}({}) {{",
        print_ident(&g.name),
        params.join(", ")
    );
    for node in &g.nodes {
        let outs: Vec<String> = node
            .outputs
            .iter()
            .map(|v| format!("%{}", names[v.index()]))
            .collect();
        let ins: Vec<String> = node
            .inputs
            .iter()
            .map(|v| format!("%{}", names[v.index()]))
            .collect();
        let _ = write!(
            s,
            "{pad}  {} = {}({})",
            outs.join(", "),
            node.op.name(),
            ins.join(", ")
        );
        if !node.attrs.is_empty() {
            s.push_str(" {");
            for (k, (name, a)) in node.attrs.0.iter().enumerate() {
                if k > 0 {
                    s.push_str(", ");
                }
                let _ = write!(s, "{name}=");
                print_attr(s, a, indent + 1);
            }
            s.push('}');
        }
        let tys: Vec<String> = node.outputs.iter().map(|&v| g.ty(v).to_string()).collect();
        let _ = writeln!(s, " : {}", tys.join(", "));
    }
    let outs: Vec<String> = g
        .outputs
        .iter()
        .map(|v| format!("%{}", names[v.index()]))
        .collect();
    if outs.is_empty() {
        let _ = writeln!(s, "{pad}  return");
    } else {
        let _ = writeln!(s, "{pad}  return {}", outs.join(", "));
    }
    let _ = write!(s, "{pad}}}");
}

fn print_ident(name: &str) -> String {
    if is_name(name) {
        name.to_string()
    } else {
        // Keep names printable and parseable.
        name.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect::<String>()
            + if name.is_empty() { "g" } else { "" }
    }
}

fn fmt_float(x: f64) -> String {
    if x.is_nan() {
        "nan".into()
    } else if x.is_infinite() {
        if x > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        // Debug prints the shortest string that round-trips, always with
        // a '.' or an exponent, so it never reads back as an int.
        format!("{x:?}")
    }
}

fn print_attr(s: &mut String, a: &Attr, indent: usize) {
    match a {
        Attr::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
        Attr::Int(i) => s.push_str(&i.to_string()),
        Attr::Float(f) => s.push_str(&fmt_float(*f)),
        Attr::Str(t) => s.push_str(&serde_json::to_string(t).unwrap_or_default()),
        Attr::Ints(v) => {
            let items: Vec<String> = v.iter().map(|i| i.to_string()).collect();
            let _ = write!(s, "[{}]", items.join(", "));
        }
        Attr::Floats(v) => {
            let items: Vec<String> = v.iter().map(|&f| fmt_float(f)).collect();
            let _ = write!(s, "[{}]", items.join(", "));
        }
        Attr::DType(d) => s.push_str(d.name()),
        Attr::Tensor(t) => {
            let _ = write!(s, "tensor<{}{}> ", t.dtype(), t.shape());
            let data = &t.to_json()["data"];
            print_json_data(s, data);
        }
        Attr::Graph(g) => print_graph(s, g, indent),
    }
}

fn print_json_data(s: &mut String, v: &serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Array(items) => {
            s.push('[');
            for (k, it) in items.iter().enumerate() {
                if k > 0 {
                    s.push_str(", ");
                }
                print_json_data(s, it);
            }
            s.push(']');
        }
        Value::String(t) if matches!(t.as_str(), "nan" | "inf" | "-inf") => s.push_str(t),
        Value::Number(n) if n.is_f64() => s.push_str(&fmt_float(n.as_f64().unwrap_or(f64::NAN))),
        other => s.push_str(&other.to_string()),
    }
}
