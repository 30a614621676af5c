//! A session: compiled programs cached per (graph, input shapes, target,
//! options), so compiling the same thing twice is a counted cache hit.

use crate::compile::{compile_with, CompileOptions, Compiled, Target};
use crate::error::Error;
use rlx_ir::{text, Graph};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

/// Cache statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: usize,
    pub misses: usize,
    pub entries: usize,
}

/// Compiles graphs and keeps the results.
#[derive(Default)]
pub struct Session {
    options: CompileOptions,
    cache: Mutex<(HashMap<u64, Arc<Compiled>>, CacheStats)>,
}

impl Session {
    pub fn new(options: CompileOptions) -> Self {
        Session {
            options,
            cache: Mutex::default(),
        }
    }

    /// What every compile of this session uses.
    pub fn options(&self) -> &CompileOptions {
        &self.options
    }

    /// The key: the graph's text (which includes input shapes, every
    /// attribute and constant), the target and the dispatch options.
    fn key(&self, graph: &Graph, target: &Target) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        text::print(graph).hash(&mut h);
        format!("{target:?}").hash(&mut h);
        format!(
            "{:?}|{}|{:?}|{:?}",
            self.options.dispatch, self.options.optimize, self.options.amp, self.options.ptq
        )
        .hash(&mut h);
        h.finish()
    }

    /// Compile, or return the cached program for the same inputs.
    pub fn compile(
        &self,
        graph: &Graph,
        target: impl Into<Target>,
    ) -> Result<Arc<Compiled>, Error> {
        let target = target.into();
        let key = self.key(graph, &target);
        {
            let mut guard = self.lock();
            if let Some(c) = guard.0.get(&key).cloned() {
                guard.1.hits += 1;
                return Ok(c);
            }
        }
        let compiled = Arc::new(compile_with(graph, target, &self.options)?);
        let mut guard = self.lock();
        guard.1.misses += 1;
        guard.0.insert(key, compiled.clone());
        guard.1.entries = guard.0.len();
        Ok(compiled)
    }

    pub fn stats(&self) -> CacheStats {
        self.lock().1
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (HashMap<u64, Arc<Compiled>>, CacheStats)> {
        // A poisoned lock only means another thread panicked mid-insert;
        // the map itself is still consistent.
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DType, Device, Trace};

    fn graph(n: usize) -> Graph {
        let t = Trace::new("g");
        let x = t.input("x", DType::F32, [n, 4]);
        let y = (&x + &x).relu();
        t.finish(&[&y]).unwrap()
    }

    #[test]
    fn second_compile_of_the_same_graph_is_a_hit() {
        let s = Session::default();
        let a = s.compile(&graph(2), Device::Cpu).unwrap();
        let b = s.compile(&graph(2), Device::Cpu).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(
            s.stats(),
            CacheStats {
                hits: 1,
                misses: 1,
                entries: 1
            }
        );
        // Another input shape is another program.
        s.compile(&graph(3), Device::Cpu).unwrap();
        assert_eq!(
            s.stats(),
            CacheStats {
                hits: 1,
                misses: 2,
                entries: 2
            }
        );
    }
}
