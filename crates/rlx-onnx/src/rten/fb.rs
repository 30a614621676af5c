//! A bounds-checked reader of FlatBuffers tables, vectors, strings and
//! unions — what the `.rten` model format is written in. Every offset and
//! length is checked against the buffer before it is followed or
//! allocated, so a damaged file is an error, never a panic or a huge
//! allocation. Fields are addressed by slot (the schema's field index:
//! vtable offset 4 + 2·slot).

pub(super) type R<T> = Result<T, String>;

#[derive(Clone, Copy)]
pub(super) struct Table<'a> {
    buf: &'a [u8],
    pos: usize,
    vtable: usize,
    vtable_len: usize,
}

fn bytes<const N: usize>(buf: &[u8], pos: usize) -> R<[u8; N]> {
    pos.checked_add(N)
        .and_then(|end| buf.get(pos..end))
        .map(|s| s.try_into().unwrap())
        .ok_or_else(|| {
            format!(
                "offset {pos} (+{N}) is past the end of the model data ({} bytes)",
                buf.len()
            )
        })
}

pub(super) fn u32_at(buf: &[u8], pos: usize) -> R<u32> {
    Ok(u32::from_le_bytes(bytes(buf, pos)?))
}

/// The table a `uoffset` at `pos` points to.
fn follow(buf: &[u8], pos: usize) -> R<usize> {
    let off = u32_at(buf, pos)? as usize;
    pos.checked_add(off)
        .filter(|&p| p < buf.len())
        .ok_or_else(|| format!("offset {off} at {pos} points past the end of the model data"))
}

impl<'a> Table<'a> {
    /// The root table of `buf`.
    pub(super) fn root(buf: &'a [u8]) -> R<Table<'a>> {
        let pos = follow(buf, 0)?;
        Table::at(buf, pos)
    }

    fn at(buf: &'a [u8], pos: usize) -> R<Table<'a>> {
        let soff = i32::from_le_bytes(bytes(buf, pos)?) as i64;
        let vtable = pos as i64 - soff;
        if vtable < 0 || vtable as usize + 4 > buf.len() {
            return Err(format!(
                "the table at {pos} has its vtable outside the data"
            ));
        }
        let vtable = vtable as usize;
        let vtable_len = u16::from_le_bytes(bytes(buf, vtable)?) as usize;
        if vtable_len < 4 || vtable + vtable_len > buf.len() {
            return Err(format!(
                "the vtable at {vtable} has a bad size {vtable_len}"
            ));
        }
        Ok(Table {
            buf,
            pos,
            vtable,
            vtable_len,
        })
    }

    /// Where field `slot` is, or `None` when it is absent (its default).
    fn field(&self, slot: usize) -> R<Option<usize>> {
        let at = 4 + 2 * slot;
        if at + 2 > self.vtable_len {
            return Ok(None);
        }
        let off = u16::from_le_bytes(bytes(self.buf, self.vtable + at)?) as usize;
        if off == 0 {
            return Ok(None);
        }
        Ok(Some(self.pos + off))
    }

    pub(super) fn has(&self, slot: usize) -> R<bool> {
        Ok(self.field(slot)?.is_some())
    }

    pub(super) fn u8(&self, slot: usize) -> R<Option<u8>> {
        self.field(slot)?
            .map(|p| bytes::<1>(self.buf, p).map(|b| b[0]))
            .transpose()
    }
    pub(super) fn bool(&self, slot: usize) -> R<bool> {
        self.bool_or(slot, false)
    }
    /// A bool field whose schema default is `default` (absent = default).
    pub(super) fn bool_or(&self, slot: usize, default: bool) -> R<bool> {
        Ok(self.u8(slot)?.map_or(default, |b| b != 0))
    }
    pub(super) fn u16(&self, slot: usize) -> R<Option<u16>> {
        self.field(slot)?
            .map(|p| bytes(self.buf, p).map(u16::from_le_bytes))
            .transpose()
    }
    pub(super) fn i32(&self, slot: usize) -> R<Option<i32>> {
        self.field(slot)?
            .map(|p| bytes(self.buf, p).map(i32::from_le_bytes))
            .transpose()
    }
    pub(super) fn u32(&self, slot: usize) -> R<Option<u32>> {
        self.field(slot)?
            .map(|p| bytes(self.buf, p).map(u32::from_le_bytes))
            .transpose()
    }
    pub(super) fn u64(&self, slot: usize) -> R<Option<u64>> {
        self.field(slot)?
            .map(|p| bytes(self.buf, p).map(u64::from_le_bytes))
            .transpose()
    }
    pub(super) fn f32(&self, slot: usize) -> R<Option<f32>> {
        self.field(slot)?
            .map(|p| bytes(self.buf, p).map(f32::from_le_bytes))
            .transpose()
    }

    /// The sub-table of field `slot`.
    pub(super) fn table(&self, slot: usize) -> R<Option<Table<'a>>> {
        match self.field(slot)? {
            Some(p) => Ok(Some(Table::at(self.buf, follow(self.buf, p)?)?)),
            None => Ok(None),
        }
    }

    /// Field `slot` as a vector of `size`-byte elements: (first, count),
    /// its bytes checked to lie inside the data.
    fn vector(&self, slot: usize, size: usize) -> R<Option<(usize, usize)>> {
        let Some(p) = self.field(slot)? else {
            return Ok(None);
        };
        let v = follow(self.buf, p)?;
        let n = u32_at(self.buf, v)? as usize;
        let start = v + 4;
        n.checked_mul(size)
            .and_then(|b| start.checked_add(b))
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| {
                format!("a vector of {n} elements at {v} runs past the end of the data")
            })?;
        Ok(Some((start, n)))
    }

    fn scalars<const N: usize, T>(&self, slot: usize, f: fn([u8; N]) -> T) -> R<Option<Vec<T>>> {
        let Some((start, n)) = self.vector(slot, N)? else {
            return Ok(None);
        };
        (0..n)
            .map(|i| bytes(self.buf, start + i * N).map(f))
            .collect::<R<Vec<T>>>()
            .map(Some)
    }
    pub(super) fn vec_u8(&self, slot: usize) -> R<Option<Vec<u8>>> {
        self.scalars::<1, u8>(slot, |b| b[0])
    }
    pub(super) fn vec_i8(&self, slot: usize) -> R<Option<Vec<i8>>> {
        self.scalars::<1, i8>(slot, |b| b[0] as i8)
    }
    pub(super) fn vec_i32(&self, slot: usize) -> R<Option<Vec<i32>>> {
        self.scalars(slot, i32::from_le_bytes)
    }
    pub(super) fn vec_u32(&self, slot: usize) -> R<Option<Vec<u32>>> {
        self.scalars(slot, u32::from_le_bytes)
    }
    pub(super) fn vec_f32(&self, slot: usize) -> R<Option<Vec<f32>>> {
        self.scalars(slot, f32::from_le_bytes)
    }

    /// A vector of tables.
    pub(super) fn vec_tables(&self, slot: usize) -> R<Vec<Table<'a>>> {
        let Some((start, n)) = self.vector(slot, 4)? else {
            return Ok(Vec::new());
        };
        (0..n)
            .map(|i| Table::at(self.buf, follow(self.buf, start + 4 * i)?))
            .collect()
    }

    /// A string field (UTF-8).
    pub(super) fn str(&self, slot: usize) -> R<Option<&'a str>> {
        let Some((start, n)) = self.vector(slot, 1)? else {
            return Ok(None);
        };
        std::str::from_utf8(&self.buf[start..start + n])
            .map(Some)
            .map_err(|_| format!("the string at {start} is not UTF-8"))
    }
}
