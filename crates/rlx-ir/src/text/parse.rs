//! The recursive-descent parser over the lexer's tokens.

use super::lex::{Lexer, Spanned, Tok};
use crate::attr::{Attr, Attrs};
use crate::dtype::DType;
use crate::error::IrError;
use crate::graph::{Graph, GraphBuilder, ValueId};
use crate::literal;
use crate::nesting::{self, NestingGuard};
use crate::op::Op;
use crate::shape::{Shape, TensorType};
use crate::tensor::{float_to_json, HostTensor};
use std::collections::{HashMap, HashSet};

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
            Tok::UInt(u) => format!("`{u}`"),
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

    /// A level of nesting (a graph or a `[` of tensor data): refused past
    /// `limits().max_nesting_depth` before the recursion can overflow the
    /// stack, naming where in the source it happened.
    fn enter(&self, at: usize, what: &str) -> Result<NestingGuard, IrError> {
        let s = &self.toks[at.min(self.toks.len() - 1)];
        Ok(nesting::enter(&format!(
            "{what} at line {}, column {}",
            s.line, s.col
        ))?)
    }

    fn graph(&mut self) -> Result<Graph, IrError> {
        let _level = self.enter(self.pos, "nested graph")?;
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
            // All-digit names are positions, not names (the printer writes
            // them as the value's index): an input keeps one, as inputs
            // must be named, but its own index, so printing and parsing
            // again gives the same graph.
            if n.bytes().all(|c| c.is_ascii_digit()) {
                b.name_value(v, v.index().to_string());
            }
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
        let outs = b.push(op, &inputs, attrs).map_err(|e| match e {
            IrError::Limit(l) => IrError::Limit(l),
            e => self.err_at(op_at, e.to_string()),
        })?;
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
                    let data = self.json_data(ty.dtype)?;
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

    /// Tensor literal data of `dtype`: nested lists of numbers, bools,
    /// strings. Every number is range-checked where it is written (see
    /// [`crate::literal`]), so an error names its line and column.
    fn json_data(&mut self, dtype: DType) -> Result<serde_json::Value, IrError> {
        use serde_json::Value;
        let at = self.pos;
        Ok(match self.next() {
            Tok::Punct('[') => {
                let _level = self.enter(at, "nested tensor data")?;
                let mut items = Vec::new();
                while !self.eat(']') {
                    if !items.is_empty() {
                        self.punct(',')?;
                    }
                    items.push(self.json_data(dtype)?);
                }
                Value::Array(items)
            }
            Tok::Int(i) => {
                literal::check_int(dtype, i).map_err(|e| self.err_at(at, e.to_string()))?;
                Value::from(i)
            }
            Tok::UInt(u) if dtype == DType::U64 => Value::from(u),
            Tok::UInt(u) => {
                return Err(self.err_at(at, literal::u64_out_of_range(dtype, u).to_string()))
            }
            Tok::Float(f) => {
                if !(dtype.is_float() || dtype == DType::C64) {
                    return Err(self.err_at(
                        at,
                        format!(
                            "{} is not an integer, and {dtype} holds integers",
                            Self::describe(&Tok::Float(f))
                        ),
                    ));
                }
                literal::check_float(dtype, f).map_err(|e| self.err_at(at, e.to_string()))?;
                float_to_json(f)
            }
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
