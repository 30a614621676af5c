//! A per-kernel time profile of one compiled program, asked of any backend
//! through [`crate::Executable::profile`]: the CPU times each op on the
//! host clock, wgpu with GPU timestamps (or each kernel alone), CUDA each
//! launch alone in a CUDA graph. `how` says which, since the three are not
//! the same measurement.

use serde::Serialize;
use std::fmt;

/// Time spent in one kernel (all its calls in the profiled run).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelTime {
    pub kernel: String,
    pub calls: usize,
    pub ms: f64,
}

/// The kernels of a run, hottest first, and how they were timed.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Profile {
    pub kernels: Vec<KernelTime>,
    pub how: String,
}

impl Profile {
    /// A profile from (kernel, milliseconds) per call: calls of one kernel
    /// are summed, hottest first.
    pub fn from_calls(calls: impl IntoIterator<Item = (String, f64)>, how: &str) -> Profile {
        let mut kernels: Vec<KernelTime> = Vec::new();
        for (kernel, ms) in calls {
            match kernels.iter_mut().find(|k| k.kernel == kernel) {
                Some(k) => {
                    k.calls += 1;
                    k.ms += ms;
                }
                None => kernels.push(KernelTime {
                    kernel,
                    calls: 1,
                    ms,
                }),
            }
        }
        kernels.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        Profile {
            kernels,
            how: how.to_string(),
        }
    }

    /// The sum over kernels.
    pub fn total_ms(&self) -> f64 {
        self.kernels.iter().map(|k| k.ms).sum()
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.total_ms();
        writeln!(f, "per-kernel profile ({})", self.how)?;
        writeln!(
            f,
            "{:<44} {:>6} {:>11} {:>7}",
            "kernel", "calls", "total ms", "share"
        )?;
        for k in &self.kernels {
            let share = if total > 0.0 {
                100.0 * k.ms / total
            } else {
                0.0
            };
            writeln!(
                f,
                "{:<44} {:>6} {:>11.3} {:>6.1}%",
                k.kernel, k.calls, k.ms, share
            )?;
        }
        write!(f, "{:<44} {:>6} {:>11.3}", "total", "", total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_of_one_kernel_are_summed_hottest_first() {
        let p = Profile::from_calls(
            [
                ("a".to_string(), 1.0),
                ("b".to_string(), 2.5),
                ("a".to_string(), 2.0),
            ],
            "test",
        );
        assert_eq!(p.kernels.len(), 2);
        assert_eq!((p.kernels[0].kernel.as_str(), p.kernels[0].calls), ("a", 2));
        assert_eq!(p.kernels[0].ms, 3.0);
        assert_eq!(p.total_ms(), 5.5);
        let s = p.to_string();
        assert!(s.contains("(test)") && s.contains("54.5%"), "{s}");
    }
}
