//! Images + labels in memory, and deterministic shuffled batches.

use rlx_ir::{DType, HostTensor};

/// Images as f32 in [0, 1], row-major `(n, rows, cols)`, with u8 labels.
#[derive(Clone, Debug)]
pub struct Dataset {
    pub images: Vec<f32>,
    pub labels: Vec<u8>,
    pub rows: usize,
    pub cols: usize,
}

/// One batch: images `(b, rows*cols)` or `(b, 1, rows, cols)`, labels as
/// one-hot f32 `(b, classes)` and as i64 `(b)`.
pub struct Batch {
    pub images: HostTensor,
    pub onehot: HostTensor,
    pub labels: Vec<u8>,
}

impl Dataset {
    pub fn len(&self) -> usize {
        self.labels.len()
    }
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
    pub fn pixels(&self) -> usize {
        self.rows * self.cols
    }
    /// The examples at `idx`, in that order.
    pub fn subset(&self, idx: &[usize]) -> Dataset {
        let p = self.pixels();
        let mut images = Vec::with_capacity(idx.len() * p);
        for &i in idx {
            images.extend_from_slice(&self.images[i * p..(i + 1) * p]);
        }
        Dataset {
            images,
            labels: idx.iter().map(|&i| self.labels[i]).collect(),
            rows: self.rows,
            cols: self.cols,
        }
    }
    /// Split off every `k`-th example of each class as a held-out set
    /// (stratified): (train, test).
    pub fn split_every(&self, k: usize) -> (Dataset, Dataset) {
        let mut seen = [0usize; 256];
        let (test, train): (Vec<usize>, Vec<usize>) = (0..self.len()).partition(|&i| {
            let c = &mut seen[self.labels[i] as usize];
            *c += 1;
            *c % k == 0
        });
        (self.subset(&train), self.subset(&test))
    }
    /// A seeded permutation of 0..len (SplitMix64 + Fisher-Yates).
    pub fn permutation(&self, seed: u64) -> Vec<usize> {
        let mut s = seed;
        let mut next = || {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let mut p: Vec<usize> = (0..self.len()).collect();
        for i in (1..p.len()).rev() {
            p.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        p
    }
    /// Batches of exactly `size` examples in the order of `order` (a final
    /// partial batch is dropped so that every step has one shape).
    /// `image_shape` is `[size, pixels]` or `[size, 1, rows, cols]`.
    pub fn batches<'a>(
        &'a self,
        order: &'a [usize],
        size: usize,
        nchw: bool,
        classes: usize,
    ) -> impl Iterator<Item = Batch> + 'a {
        order
            .chunks_exact(size)
            .map(move |idx| self.batch(idx, nchw, classes))
    }
    pub fn batch(&self, idx: &[usize], nchw: bool, classes: usize) -> Batch {
        let p = self.pixels();
        let mut x = Vec::with_capacity(idx.len() * p);
        let mut y = vec![0f32; idx.len() * classes];
        for (r, &i) in idx.iter().enumerate() {
            x.extend_from_slice(&self.images[i * p..(i + 1) * p]);
            y[r * classes + self.labels[i] as usize] = 1.0;
        }
        let shape = if nchw {
            vec![idx.len(), 1, self.rows, self.cols]
        } else {
            vec![idx.len(), p]
        };
        Batch {
            images: HostTensor::from_slice(&x, shape).expect("batch shape"),
            onehot: HostTensor::from_slice(&y, vec![idx.len(), classes]).expect("label shape"),
            labels: idx.iter().map(|&i| self.labels[i]).collect(),
        }
    }
    /// Labels as an i64 tensor.
    pub fn labels_tensor(labels: &[u8]) -> HostTensor {
        HostTensor::from_i64(
            DType::I64,
            vec![labels.len()],
            labels.iter().map(|&l| l as i64).collect(),
        )
        .expect("labels")
    }

    /// A copy with every image translated by a random whole-pixel offset in
    /// [-max, max] on each axis (zeros shifted in): augmentation for small
    /// training sets. Seeded, so a run is reproducible.
    pub fn shifted(&self, seed: u64, max: usize) -> Dataset {
        let (r, c) = (self.rows as isize, self.cols as isize);
        let span = 2 * max as u64 + 1;
        let mut s = seed;
        let mut next = || {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) % span) as isize - max as isize
        };
        let p = self.pixels();
        let mut images = vec![0f32; self.images.len()];
        for n in 0..self.len() {
            let (dy, dx) = (next(), next());
            let src = &self.images[n * p..(n + 1) * p];
            let dst = &mut images[n * p..(n + 1) * p];
            for y in 0..r {
                let sy = y - dy;
                if !(0..r).contains(&sy) {
                    continue;
                }
                for x in 0..c {
                    let sx = x - dx;
                    if (0..c).contains(&sx) {
                        dst[(y * c + x) as usize] = src[(sy * c + sx) as usize];
                    }
                }
            }
        }
        Dataset {
            images,
            labels: self.labels.clone(),
            rows: self.rows,
            cols: self.cols,
        }
    }
}
