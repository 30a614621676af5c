//! The lexer: source bytes to tokens with their line and column.

use crate::error::IrError;

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    Value(String),
    Global(String),
    Ident(String),
    Int(i64),
    /// An integer above `i64::MAX` (a u64 literal element).
    UInt(u64),
    Float(f64),
    Str(String),
    Punct(char),
    Eof,
}

pub(super) struct Lexer<'a> {
    pub(super) src: &'a [u8],
    pub(super) pos: usize,
    pub(super) line: usize,
    pub(super) col: usize,
}

#[derive(Clone, Debug)]
pub(super) struct Spanned {
    pub(super) tok: Tok,
    pub(super) line: usize,
    pub(super) col: usize,
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

    pub(super) fn tokens(mut self) -> Result<Vec<Spanned>, IrError> {
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
            match text.parse::<f64>() {
                // Rust reads `1e400` as infinity; only `inf` may mean that.
                Ok(x) if x.is_infinite() => Err(self.err(format!(
                    "float `{text}` overflows f64 (write `inf` for infinity)"
                ))),
                Ok(x) => Ok(Tok::Float(x)),
                Err(_) => Err(self.err(format!("bad float `{text}`"))),
            }
        } else {
            // Above i64::MAX only u64 literals can hold it (the parser checks).
            text.parse()
                .map(Tok::Int)
                .or_else(|_| text.parse().map(Tok::UInt))
                .map_err(|_| self.err(format!("bad integer `{text}`")))
        }
    }
}
