//! The MIR text format (grammar in docs/TEXT_IR.md): [`print()`] and
//! [`parse`]. Printing writes every attribute and type, so
//! `print(parse(print(g))) == print(g)` and `parse(print(g)) == g`.

mod lex;
mod parse;
mod print;

pub use parse::parse;
pub use print::print;

#[cfg(test)]
mod tests;
