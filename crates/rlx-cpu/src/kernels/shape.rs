use super::*;

pub(crate) const KERNELS: &[(&str, Kernel)] = &[];
