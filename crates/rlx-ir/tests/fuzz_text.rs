//! Mutation fuzzing of the text parser and the JSON reader: random edits of
//! valid graphs must give a graph or a typed error — never a panic. Every
//! graph that parses must print and re-parse to the same text.

use rlx_ir::{text, Graph};

const SEEDS: &[&str] = &[
    "graph @g(%x: f32[2,3], %w: f32[3,4]) {\n  %2 = matmul(%x, %w) : f32[2,4]\n  %3 = reduce_sum(%2) {axes=[1], keepdim=false} : f32[2]\n  %4, %5 = topk(%2) {k=2} : f32[2,2], i64[2,2]\n  return %3, %4, %5\n}",
    "graph @g(%x: f32[1,2,5,5], %w: f32[3,2,3,3]) {\n  %c = conv(%x, %w) {pads=[1, 1, 1, 1], strides=[2, 2]}\n  %p = max_pool(%c) {kernel=[2, 2]}\n  %r = reshape(%p) {shape=[-1]}\n  %s = slice(%r) {starts=[-1], ends=[-100], steps=[-2]}\n  return %s\n}",
    "graph @g(%c: bool[], %x: f32[2]) {\n  %y = if(%c, %x) {then_branch=graph @t(%a: f32[2]) {\n    %1 = exp(%a)\n    return %1\n  }, else_branch=graph @e(%a: f32[2]) {\n    return %a\n  }}\n  %k = constant() {value=tensor<f32[2]> [1.5, nan]}\n  %z = add(%y, %k)\n  return %z\n}",
    "graph @g(%q: f32[2,4,8], %k: f32[2,4,8], %v: f32[2,4,8], %cs: f32[4,4]) {\n  %a = attention(%q, %k, %v) {mask_kind=\"causal\"}\n  %r = rope(%a, %cs, %cs) {interleaved=true}\n  %p = pad(%r) {pads=[0, 1, 0, 0, 1, 0], mode=\"reflect\"}\n  %i = argmax(%p) {axis=-1}\n  %o = one_hot(%i) {depth=3}\n  return %o\n}",
];

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

const PIECES: &[&str] = &[
    "%",
    "@",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    ",",
    "=",
    ":",
    "-",
    "-1",
    "0",
    "99999999999999999999",
    "1e308",
    "nan",
    "f32",
    "i64",
    "q4_0",
    "bool",
    "graph",
    "return",
    "tensor<",
    ">",
    "\"",
    "\\",
    "add",
    "reshape",
    "concat",
    "scan",
    "while",
    "%x",
    "%2",
    "[0]",
    "[18446744073709551615]",
    "\n",
    " ",
    "é",
    "\u{0}",
];

fn mutate(src: &str, rng: &mut Rng) -> String {
    let mut s: Vec<char> = src.chars().collect();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(s.len() + 1);
        match rng.below(3) {
            0 if !s.is_empty() => {
                let end = (at + 1 + rng.below(6)).min(s.len());
                s.drain(at.min(s.len())..end);
            }
            1 => {
                let p: Vec<char> = PIECES[rng.below(PIECES.len())].chars().collect();
                s.splice(at..at, p);
            }
            _ => {
                if at < s.len() {
                    s[at] = PIECES[rng.below(PIECES.len())]
                        .chars()
                        .next()
                        .unwrap_or(' ');
                }
            }
        }
    }
    s.into_iter().collect()
}

#[test]
fn mutated_text_never_panics() {
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let (mut ok, mut err) = (0, 0);
    for round in 0..6000 {
        let src = mutate(SEEDS[round % SEEDS.len()], &mut rng);
        let r = std::panic::catch_unwind(|| text::parse(&src));
        match r {
            Err(_) => panic!("parser panicked on:\n{src}"),
            Ok(Ok(g)) => {
                ok += 1;
                let p = text::print(&g);
                let again = text::parse(&p)
                    .unwrap_or_else(|e| panic!("printed graph does not re-parse: {e}\n{p}"));
                assert_eq!(text::print(&again), p);
            }
            Ok(Err(_)) => err += 1,
        }
    }
    assert!(ok > 0 && err > 0, "ok {ok}, err {err}");
}

#[test]
fn mutated_json_never_panics() {
    let mut rng = Rng(77);
    for round in 0..3000 {
        let g = text::parse(SEEDS[round % SEEDS.len()]).unwrap();
        let json = serde_json::to_string(&g).unwrap();
        let bad = mutate(&json, &mut rng);
        let r = std::panic::catch_unwind(|| {
            serde_json::from_str::<serde_json::Value>(&bad)
                .ok()
                .map(|v| Graph::from_json(&v))
        });
        assert!(r.is_ok(), "JSON reader panicked on:\n{bad}");
    }
}

#[test]
fn seeds_parse_and_json_round_trips() {
    for s in SEEDS {
        let g = text::parse(s).unwrap_or_else(|e| panic!("{e}\n{s}"));
        let back = Graph::from_json(&g.to_json()).unwrap();
        assert_eq!(text::print(&back), text::print(&g));
    }
}

#[test]
fn huge_shapes_are_errors_not_overflows() {
    let cases = [
        "graph @g(%x: f32[4294967296,4294967296,4294967296]) {\n  %y = reshape(%x) {shape=[-1]}\n  return %y\n}",
        "graph @g(%x: f32[4294967296,4294967296,4294967296]) {\n  %y = reduce_sum(%x)\n  return %y\n}",
        "graph @g(%x: f32[2]) {\n  %y = reshape(%x) {shape=[9223372036854775807, 9223372036854775807]}\n  return %y\n}",
        "graph @g(%x: f32[2]) {\n  %y = tile(%x) {repeats=[9223372036854775807]}\n  return %y\n}",
        "graph @g(%x: f32[2]) {\n  %y = pad(%x) {pads=[9223372036854775807, 9223372036854775807]}\n  return %y\n}",
        "graph @g(%x: f32[2]) {\n  %y = slice(%x) {starts=[-9223372036854775808], ends=[9223372036854775807], steps=[-9223372036854775808]}\n  return %y\n}",
        "graph @g() {\n  %y = arange() {len=9223372036854775807}\n  return %y\n}",
        "graph @g() {\n  %y = random_uniform() {shape=[4294967296, 4294967296, 4294967296], seed=1}\n  return %y\n}",
        "graph @g(%x: f32[1,1,4]) {\n  %y = max_pool(%x) {kernel=[3], strides=[9223372036854775807], dilations=[9223372036854775807]}\n  return %y\n}",
        "graph @g(%x: f32[1,1,4], %w: f32[1,1,2]) {\n  %y = conv_transpose(%x, %w) {strides=[9223372036854775807]}\n  return %y\n}",
    ];
    for c in cases {
        let r = std::panic::catch_unwind(|| text::parse(c));
        assert!(r.is_ok(), "panicked on:\n{c}");
    }
}
