//! The MIR text format (grammar in docs/TEXT_IR.md): [`print`] and
//! [`parse`]. Printing writes every attribute and type, so
//! `print(parse(print(g))) == print(g)` and `parse(print(g)) == g`.

use crate::attr::{Attr, Attrs};
use crate::dtype::DType;
use crate::error::IrError;
use crate::graph::{Graph, GraphBuilder, ValueId};
use crate::op::Op;
use crate::shape::{Shape, TensorType};
use crate::tensor::{float_to_json, HostTensor};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

// ------------------------------------------------------------------ printer

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

// ------------------------------------------------------------------- lexer

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Value(String),
    Global(String),
    Ident(String),
    Int(i64),
    Float(f64),
    Str(String),
    Punct(char),
    Eof,
}

struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
    line: usize,
    col: usize,
}

#[derive(Clone, Debug)]
struct Spanned {
    tok: Tok,
    line: usize,
    col: usize,
}

impl<'a> Lexer<'a> {
    fn err(&self, msg: impl Into<String>) -> IrError {
        IrError::Parse {
            line: self.line,
            col: self.col,
            msg: msg.into(),
        }
    }

    fn bump(&mut self) -> Option<u8> {
        let c = *self.src.get(self.pos)?;
        self.pos += 1;
        if c == b'\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn word(&mut self) -> String {
        let start = self.pos;
        while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
        {
            self.bump();
        }
        String::from_utf8_lossy(&self.src[start..self.pos]).into_owned()
    }

    fn tokens(mut self) -> Result<Vec<Spanned>, IrError> {
        let mut out = Vec::new();
        loop {
            while let Some(c) = self.peek() {
                if c.is_ascii_whitespace() {
                    self.bump();
                } else if c == b'/' && self.src.get(self.pos + 1) == Some(&b'/') {
                    while !matches!(self.peek(), None | Some(b'\n')) {
                        self.bump();
                    }
                } else {
                    break;
                }
            }
            let (line, col) = (self.line, self.col);
            let Some(c) = self.peek() else {
                out.push(Spanned {
                    tok: Tok::Eof,
                    line,
                    col,
                });
                return Ok(out);
            };
            let tok = match c {
                b'%' | b'@' => {
                    self.bump();
                    let w = self.word();
                    if w.is_empty() {
                        return Err(self.err(format!("expected a name after `{}`", c as char)));
                    }
                    if c == b'%' {
                        Tok::Value(w)
                    } else {
                        Tok::Global(w)
                    }
                }
                b'"' => self.string()?,
                b'-' | b'+' | b'0'..=b'9' => self.number()?,
                c if c.is_ascii_alphabetic() || c == b'_' => {
                    let w = self.word();
                    match w.as_str() {
                        "nan" | "NaN" => Tok::Float(f64::NAN),
                        "inf" => Tok::Float(f64::INFINITY),
                        _ => Tok::Ident(w),
                    }
                }
                b'(' | b')' | b'{' | b'}' | b'[' | b']' | b'<' | b'>' | b',' | b'=' | b':' => {
                    self.bump();
                    Tok::Punct(c as char)
                }
                other => return Err(self.err(format!("unexpected character `{}`", other as char))),
            };
            out.push(Spanned { tok, line, col });
        }
    }

    fn string(&mut self) -> Result<Tok, IrError> {
        let start = self.pos;
        self.bump();
        loop {
            match self.bump() {
                None => return Err(self.err("unterminated string")),
                Some(b'\\') => {
                    self.bump();
                }
                Some(b'"') => break,
                Some(_) => {}
            }
        }
        let raw = String::from_utf8_lossy(&self.src[start..self.pos]);
        serde_json::from_str::<String>(&raw)
            .map(Tok::Str)
            .map_err(|e| self.err(format!("bad string: {e}")))
    }

    fn number(&mut self) -> Result<Tok, IrError> {
        let start = self.pos;
        if matches!(self.peek(), Some(b'-' | b'+')) {
            self.bump();
        }
        if self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
            let w = self.word();
            let neg = self.src[start] == b'-';
            return match w.as_str() {
                "inf" => Ok(Tok::Float(if neg {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                })),
                "nan" | "NaN" => Ok(Tok::Float(f64::NAN)),
                _ => Err(self.err(format!("expected a number, found `{w}`"))),
            };
        }
        let mut float = false;
        while let Some(c) = self.peek() {
            match c {
                b'0'..=b'9' => {}
                b'.' => float = true,
                b'e' | b'E' => {
                    float = true;
                    if matches!(self.src.get(self.pos + 1), Some(b'-' | b'+')) {
                        self.bump();
                    }
                }
                _ => break,
            }
            self.bump();
        }
        let text = String::from_utf8_lossy(&self.src[start..self.pos]).into_owned();
        if float {
            text.parse()
                .map(Tok::Float)
                .map_err(|_| self.err(format!("bad float `{text}`")))
        } else {
            text.parse()
                .map(Tok::Int)
                .map_err(|_| self.err(format!("bad integer `{text}`")))
        }
    }
}

// ------------------------------------------------------------------ parser

/// Parse one graph (and verify it).
pub fn parse(src: &str) -> Result<Graph, IrError> {
    let toks = Lexer {
        src: src.as_bytes(),
        pos: 0,
        line: 1,
        col: 1,
    }
    .tokens()?;
    let mut p = Parser { toks, pos: 0 };
    let g = p.graph()?;
    p.expect_eof()?;
    Ok(g)
}

struct Parser {
    toks: Vec<Spanned>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }
    fn next(&mut self) -> Tok {
        let t = self.toks[self.pos].tok.clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }
    fn err_at(&self, k: usize, msg: impl Into<String>) -> IrError {
        let s = &self.toks[k.min(self.toks.len() - 1)];
        IrError::Parse {
            line: s.line,
            col: s.col,
            msg: msg.into(),
        }
    }
    fn err(&self, msg: impl Into<String>) -> IrError {
        self.err_at(self.pos, msg)
    }
    fn describe(t: &Tok) -> String {
        match t {
            Tok::Value(v) => format!("`%{v}`"),
            Tok::Global(v) => format!("`@{v}`"),
            Tok::Ident(v) => format!("`{v}`"),
            Tok::Int(i) => format!("`{i}`"),
            Tok::Float(f) => format!("`{f}`"),
            Tok::Str(s) => format!("{s:?}"),
            Tok::Punct(c) => format!("`{c}`"),
            Tok::Eof => "end of input".into(),
        }
    }
    fn punct(&mut self, c: char) -> Result<(), IrError> {
        if self.peek() == &Tok::Punct(c) {
            self.next();
            Ok(())
        } else {
            Err(self.err(format!(
                "expected `{c}`, found {}",
                Self::describe(self.peek())
            )))
        }
    }
    fn eat(&mut self, c: char) -> bool {
        if self.peek() == &Tok::Punct(c) {
            self.next();
            true
        } else {
            false
        }
    }
    fn keyword(&mut self, kw: &str) -> Result<(), IrError> {
        match self.peek() {
            Tok::Ident(w) if w == kw => {
                self.next();
                Ok(())
            }
            t => Err(self.err(format!("expected `{kw}`, found {}", Self::describe(t)))),
        }
    }
    fn expect_eof(&self) -> Result<(), IrError> {
        match self.peek() {
            Tok::Eof => Ok(()),
            t => Err(self.err(format!("unexpected {} after the graph", Self::describe(t)))),
        }
    }
    fn value_name(&mut self) -> Result<String, IrError> {
        match self.next() {
            Tok::Value(v) => Ok(v),
            t => Err(self.err_at(
                self.pos.saturating_sub(1),
                format!("expected a `%value`, found {}", Self::describe(&t)),
            )),
        }
    }

    fn ty(&mut self) -> Result<TensorType, IrError> {
        let at = self.pos;
        let dtype = match self.next() {
            Tok::Ident(w) => w.parse::<DType>().map_err(|e| self.err_at(at, e))?,
            t => {
                return Err(self.err_at(
                    at,
                    format!(
                        "expected a type like f32[2,3], found {}",
                        Self::describe(&t)
                    ),
                ))
            }
        };
        self.punct('[')?;
        let mut dims = Vec::new();
        while !self.eat(']') {
            if !dims.is_empty() {
                self.punct(',')?;
            }
            match self.next() {
                Tok::Int(i) if i >= 0 => dims.push(i as usize),
                t => {
                    return Err(self.err_at(
                        self.pos - 1,
                        format!("expected a dimension, found {}", Self::describe(&t)),
                    ))
                }
            }
        }
        Ok(TensorType::new(dtype, Shape(dims)))
    }

    fn graph(&mut self) -> Result<Graph, IrError> {
        self.keyword("graph")?;
        let name = match self.next() {
            Tok::Global(n) => n,
            t => {
                return Err(self.err_at(
                    self.pos - 1,
                    format!("expected `@name`, found {}", Self::describe(&t)),
                ))
            }
        };
        let mut b = GraphBuilder::new(name);
        let mut scope: HashMap<String, ValueId> = HashMap::new();
        self.punct('(')?;
        while !self.eat(')') {
            if !scope.is_empty() {
                self.punct(',')?;
            }
            let at = self.pos;
            let n = self.value_name()?;
            self.punct(':')?;
            let ty = self.ty()?;
            let v = b.input(n.clone(), ty);
            if scope.insert(n.clone(), v).is_some() {
                return Err(self.err_at(at, format!("`%{n}` is defined twice")));
            }
        }
        self.punct('{')?;
        loop {
            if let Tok::Ident(w) = self.peek() {
                if w == "return" {
                    self.next();
                    break;
                }
            }
            self.node(&mut b, &mut scope)?;
        }
        let mut outs = Vec::new();
        while !self.eat('}') {
            if !outs.is_empty() {
                self.punct(',')?;
            }
            let at = self.pos;
            let n = self.value_name()?;
            outs.push(
                *scope
                    .get(&n)
                    .ok_or_else(|| self.err_at(at, format!("`%{n}` is not defined")))?,
            );
        }
        b.finish(&outs)
    }

    fn node(
        &mut self,
        b: &mut GraphBuilder,
        scope: &mut HashMap<String, ValueId>,
    ) -> Result<(), IrError> {
        let start = self.pos;
        let mut results = vec![self.value_name()?];
        while self.eat(',') {
            results.push(self.value_name()?);
        }
        self.punct('=')?;
        let op_at = self.pos;
        let op = match self.next() {
            Tok::Ident(w) => Op::named(&w).map_err(|e| self.err_at(op_at, e.to_string()))?,
            t => {
                return Err(self.err_at(
                    op_at,
                    format!("expected an op name, found {}", Self::describe(&t)),
                ))
            }
        };
        self.punct('(')?;
        let mut inputs = Vec::new();
        while !self.eat(')') {
            if !inputs.is_empty() {
                self.punct(',')?;
            }
            let at = self.pos;
            let n = self.value_name()?;
            inputs.push(
                *scope.get(&n).ok_or_else(|| {
                    self.err_at(at, format!("`%{n}` is used before it is defined"))
                })?,
            );
        }
        let mut attrs = Attrs::new();
        if self.eat('{') {
            while !self.eat('}') {
                if !attrs.is_empty() {
                    self.punct(',')?;
                }
                let at = self.pos;
                let key = match self.next() {
                    Tok::Ident(k) => k,
                    t => {
                        return Err(self.err_at(
                            at,
                            format!("expected an attribute name, found {}", Self::describe(&t)),
                        ))
                    }
                };
                self.punct('=')?;
                let v = self.attr_value()?;
                if attrs.0.insert(key.clone(), v).is_some() {
                    return Err(self.err_at(at, format!("attribute `{key}` is given twice")));
                }
            }
        }
        let mut annotated = Vec::new();
        if self.eat(':') {
            annotated.push(self.ty()?);
            while self.eat(',') {
                annotated.push(self.ty()?);
            }
        }
        let outs = b
            .push(op, &inputs, attrs)
            .map_err(|e| self.err_at(op_at, e.to_string()))?;
        if outs.len() != results.len() {
            return Err(self.err_at(
                start,
                format!(
                    "`{}` produces {} values, {} are named",
                    op.name(),
                    outs.len(),
                    results.len()
                ),
            ));
        }
        if !annotated.is_empty() {
            let inferred: Vec<TensorType> = outs.iter().map(|&v| b.ty(v).clone()).collect();
            if annotated != inferred {
                let f = |v: &[TensorType]| {
                    v.iter()
                        .map(|t| t.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                return Err(self.err_at(
                    op_at,
                    format!(
                        "annotated type {} differs from the inferred {}",
                        f(&annotated),
                        f(&inferred)
                    ),
                ));
            }
        }
        let mut seen = HashSet::new();
        for (n, v) in results.into_iter().zip(outs) {
            if scope.contains_key(&n) || !seen.insert(n.clone()) {
                return Err(self.err_at(start, format!("`%{n}` is defined twice")));
            }
            if !n.bytes().all(|c| c.is_ascii_digit()) {
                b.name_value(v, n.clone());
            }
            scope.insert(n, v);
        }
        Ok(())
    }

    fn attr_value(&mut self) -> Result<Attr, IrError> {
        let at = self.pos;
        Ok(match self.peek().clone() {
            Tok::Int(i) => {
                self.next();
                Attr::Int(i)
            }
            Tok::Float(f) => {
                self.next();
                Attr::Float(f)
            }
            Tok::Str(s) => {
                self.next();
                Attr::Str(s)
            }
            Tok::Punct('[') => {
                self.next();
                let (mut ints, mut floats, mut all_int) = (Vec::new(), Vec::new(), true);
                while !self.eat(']') {
                    if !floats.is_empty() {
                        self.punct(',')?;
                    }
                    match self.next() {
                        Tok::Int(i) => {
                            ints.push(i);
                            floats.push(i as f64);
                        }
                        Tok::Float(f) => {
                            all_int = false;
                            floats.push(f);
                        }
                        t => {
                            return Err(self.err_at(
                                self.pos - 1,
                                format!(
                                    "expected a number in the list, found {}",
                                    Self::describe(&t)
                                ),
                            ))
                        }
                    }
                }
                if all_int {
                    Attr::Ints(ints)
                } else {
                    Attr::Floats(floats)
                }
            }
            Tok::Ident(w) => match w.as_str() {
                "true" | "false" => {
                    self.next();
                    Attr::Bool(w == "true")
                }
                "graph" => Attr::Graph(Box::new(self.graph()?)),
                "tensor" => {
                    self.next();
                    self.punct('<')?;
                    let ty = self.ty()?;
                    self.punct('>')?;
                    let data = self.json_data()?;
                    let json =
                        serde_json::json!({"dtype": ty.dtype, "shape": ty.shape, "data": data});
                    Attr::Tensor(
                        HostTensor::from_json(&json).map_err(|e| self.err_at(at, e.to_string()))?,
                    )
                }
                _ => {
                    self.next();
                    Attr::DType(
                        w.parse::<DType>().map_err(|_| {
                            self.err_at(at, format!("unknown attribute value `{w}`"))
                        })?,
                    )
                }
            },
            t => {
                return Err(self.err(format!(
                    "expected an attribute value, found {}",
                    Self::describe(&t)
                )))
            }
        })
    }

    /// Tensor literal data: nested lists of numbers, bools, strings.
    fn json_data(&mut self) -> Result<serde_json::Value, IrError> {
        use serde_json::Value;
        let at = self.pos;
        Ok(match self.next() {
            Tok::Punct('[') => {
                let mut items = Vec::new();
                while !self.eat(']') {
                    if !items.is_empty() {
                        self.punct(',')?;
                    }
                    items.push(self.json_data()?);
                }
                Value::Array(items)
            }
            Tok::Int(i) => Value::from(i),
            Tok::Float(f) => float_to_json(f),
            Tok::Str(s) => Value::String(s),
            Tok::Ident(w) if w == "true" || w == "false" => Value::Bool(w == "true"),
            t => {
                return Err(self.err_at(
                    at,
                    format!("expected tensor data, found {}", Self::describe(&t)),
                ))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "graph @mlp(%x: f32[2,3], %w: f32[3,4]) {
  %2 = matmul(%x, %w) : f32[2,4]
  %h = relu(%2) : f32[2,4]
  %4 = reduce_sum(%h) {axes=[1], keepdim=false} : f32[2]
  %5, %6 = topk(%h) {axis=-1, k=2, largest=true} : f32[2,2], i64[2,2]
  %7 = constant() {value=tensor<f32[2]> [1.5, nan]} : f32[2]
  %8 = add(%4, %7) : f32[2]
  return %8, %5, %6
}";

    #[test]
    fn round_trips() {
        let g = parse(SRC).unwrap();
        let printed = print(&g);
        assert_eq!(printed, SRC);
        let g2 = parse(&printed).unwrap();
        assert_eq!(print(&g2), printed);
    }

    #[test]
    fn errors_point_at_the_problem() {
        let e = parse("graph @g(%x: f32[2]) {\n  %y = exp(%z)\n  return %y\n}").unwrap_err();
        assert!(matches!(e, IrError::Parse { line: 2, .. }), "{e}");
        assert!(e.to_string().contains("%z"));
        let e = parse("graph @g(%x: f32[2]) {\n  %y = frobnicate(%x)\n  return %y\n}").unwrap_err();
        assert!(e.to_string().contains("unknown op"), "{e}");
        let e = parse("graph @g(%x: f32[2], %w: f32[3]) {\n  %y = add(%x, %w)\n  return %y\n}")
            .unwrap_err();
        assert!(e.to_string().contains("do not broadcast"), "{e}");
        let e =
            parse("graph @g(%x: f32[2]) {\n  %y = exp(%x) : f32[3]\n  return %y\n}").unwrap_err();
        assert!(e.to_string().contains("annotated type"), "{e}");
    }

    #[test]
    fn subgraphs_round_trip() {
        let src = "graph @g(%c: bool[], %x: f32[2]) {
  %2 = if(%c, %x) {else_branch=graph @e(%a: f32[2]) {
    %1 = neg(%a) : f32[2]
    return %1
  }, then_branch=graph @t(%a: f32[2]) {
    %1 = exp(%a) : f32[2]
    return %1
  }} : f32[2]
  return %2
}";
        let g = parse(src).unwrap();
        assert_eq!(print(&g), src);
    }
}
