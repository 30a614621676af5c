//! "Did you mean" suggestions for unknown tensor names.

/// Names compared only by their first this-many bytes (bounds the work on
/// absurdly long names in a hostile header).
const MAX_LEN: usize = 256;

/// Up to `k` of `candidates` closest to `name` by edit distance (ties by
/// name), nearest first.
pub(crate) fn closest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    k: usize,
) -> Vec<String> {
    let a = &name.as_bytes()[..name.len().min(MAX_LEN)];
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|c| (distance(a, &c.as_bytes()[..c.len().min(MAX_LEN)]), c))
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(k)
        .map(|(_, c)| c.to_string())
        .collect()
}

/// Levenshtein distance over bytes.
fn distance(a: &[u8], b: &[u8]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, &x) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, &y) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(x != y);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_first() {
        let names = [
            "encoder.layer.0.attention.self.query.weight",
            "encoder.layer.0.attention.self.key.weight",
            "pooler.dense.bias",
        ];
        let got = closest("encoder.layer.0.attention.self.query.wieght", names, 2);
        assert_eq!(got[0], names[0]);
        assert_eq!(got.len(), 2);
        assert_eq!(distance(b"kitten", b"sitting"), 3);
    }
}
