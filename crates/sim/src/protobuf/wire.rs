//! The protobuf wire format, read-only.
//!
//! Responsibility: split an encoded message into its fields — number and raw value (varint,
//! 64-bit, length-delimited bytes, 32-bit) — in wire order, and read packed varints. Groups
//! (wire types 3 and 4, unused by Kubernetes) are rejected.
//! Inputs: bytes. Outputs: [`Field`]s, or a [`WireError`].

/// A malformed encoding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed protobuf: {0}")]
pub struct WireError(pub String);

/// One field's raw value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Raw<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 2: strings, bytes, messages, packed repeated scalars.
    Bytes(&'a [u8]),
    /// Wire type 5.
    Fixed32(u32),
}

/// One field as it appears on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a> {
    /// The field number.
    pub number: u32,
    /// Its value.
    pub raw: Raw<'a>,
}

/// A cursor over encoded bytes.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, WireError> {
        let mut value = 0_u64;
        for (i, shift) in (0..10).map(|i| (i, i * 7)) {
            let Some((&b, rest)) = self.bytes.split_first() else {
                return Err(WireError("truncated varint".into()));
            };
            self.bytes = rest;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
            if i == 9 {
                break;
            }
        }
        Err(WireError("varint longer than 10 bytes".into()))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if n > self.bytes.len() {
            return Err(WireError(format!(
                "a field of {n} bytes with {} left",
                self.bytes.len()
            )));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut out = [0_u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
}

/// The fields of an encoded message, in wire order.
pub fn fields(bytes: &[u8]) -> Result<Vec<Field<'_>>, WireError> {
    let mut r = Reader { bytes };
    let mut out = Vec::new();
    while !r.bytes.is_empty() {
        let key = r.varint()?;
        let number = u32::try_from(key >> 3)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| WireError(format!("bad field number in key {key}")))?;
        let raw = match key & 7 {
            0 => Raw::Varint(r.varint()?),
            1 => Raw::Fixed64(u64::from_le_bytes(r.fixed::<8>()?)),
            2 => {
                let len = usize::try_from(r.varint()?)
                    .map_err(|_| WireError("length does not fit".into()))?;
                Raw::Bytes(r.take(len)?)
            }
            5 => Raw::Fixed32(u32::from_le_bytes(r.fixed::<4>()?)),
            other => return Err(WireError(format!("unsupported wire type {other}"))),
        };
        out.push(Field { number, raw });
    }
    Ok(out)
}

/// The varints of a packed repeated field.
pub fn packed_varints(bytes: &[u8]) -> Result<Vec<u64>, WireError> {
    let mut r = Reader { bytes };
    let mut out = Vec::new();
    while !r.bytes.is_empty() {
        out.push(r.varint()?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_wire_type() {
        // 1: varint 150; 2: "hi"; 3: fixed32 1; 4: fixed64 2.
        let bytes = [
            0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i', 0x1d, 1, 0, 0, 0, 0x21, 2, 0, 0, 0, 0, 0, 0,
            0,
        ];
        let f = fields(&bytes).unwrap();
        assert_eq!(
            f[0],
            Field {
                number: 1,
                raw: Raw::Varint(150)
            }
        );
        assert_eq!(
            f[1],
            Field {
                number: 2,
                raw: Raw::Bytes(b"hi")
            }
        );
        assert_eq!(f[2].raw, Raw::Fixed32(1));
        assert_eq!(f[3].raw, Raw::Fixed64(2));
    }

    #[test]
    fn rejects_truncation_and_groups() {
        assert!(fields(&[0x12, 0x05, b'a']).is_err());
        assert!(fields(&[0x08, 0x96]).is_err());
        assert!(fields(&[0x0b]).is_err());
        assert_eq!(packed_varints(&[1, 0x96, 0x01]).unwrap(), vec![1, 150]);
    }
}
