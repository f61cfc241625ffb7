//! Arrow arrays → flat, row-major values of one element type, whatever list nesting or numeric
//! width the writer chose (FixedSizeList, List or LargeList; f16/f32/f64; any integer width).

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, OffsetSizeTrait};
use arrow_schema::DataType;

/// An element type a column can be flattened into.
pub(crate) trait Leaf: Sized {
    /// Appends every value of a non-nested `array` to `out`.
    fn extend_from(array: &dyn Array, out: &mut Vec<Self>) -> Result<(), String>;
}

impl Leaf for f32 {
    fn extend_from(array: &dyn Array, out: &mut Vec<f32>) -> Result<(), String> {
        match array.data_type() {
            DataType::Float32 => out.extend_from_slice(array.as_primitive::<Float32Type>().values()),
            DataType::Float64 => out.extend(array.as_primitive::<Float64Type>().values().iter().map(|&v| v as f32)),
            DataType::Float16 => out.extend(array.as_primitive::<Float16Type>().values().iter().map(|v| v.to_f32())),
            other => return Err(format!("expected floats, found {other}")),
        }
        Ok(())
    }
}

impl Leaf for f64 {
    fn extend_from(array: &dyn Array, out: &mut Vec<f64>) -> Result<(), String> {
        match array.data_type() {
            DataType::Float64 => out.extend_from_slice(array.as_primitive::<Float64Type>().values()),
            DataType::Float32 => out.extend(array.as_primitive::<Float32Type>().values().iter().map(|&v| f64::from(v))),
            other => return Err(format!("expected floats, found {other}")),
        }
        Ok(())
    }
}

impl Leaf for i64 {
    fn extend_from(array: &dyn Array, out: &mut Vec<i64>) -> Result<(), String> {
        macro_rules! widen {
            ($t:ty) => {
                out.extend(array.as_primitive::<$t>().values().iter().map(|&v| i64::from(v)))
            };
        }
        match array.data_type() {
            DataType::Int64 => out.extend_from_slice(array.as_primitive::<Int64Type>().values()),
            DataType::Int32 => widen!(Int32Type),
            DataType::Int16 => widen!(Int16Type),
            DataType::Int8 => widen!(Int8Type),
            DataType::UInt32 => widen!(UInt32Type),
            DataType::UInt16 => widen!(UInt16Type),
            DataType::UInt8 => widen!(UInt8Type),
            DataType::UInt64 => {
                for &v in array.as_primitive::<UInt64Type>().values() {
                    out.push(i64::try_from(v).map_err(|_| format!("value {v} does not fit in int64"))?);
                }
            }
            other => return Err(format!("expected integers, found {other}")),
        }
        Ok(())
    }
}

impl Leaf for bool {
    fn extend_from(array: &dyn Array, out: &mut Vec<bool>) -> Result<(), String> {
        match array.data_type() {
            DataType::Boolean => out.extend(array.as_boolean().values().iter()),
            other => return Err(format!("expected booleans, found {other}")),
        }
        Ok(())
    }
}

/// Appends the values of `array` (one entry per row) to `out`, checking that every row holds
/// exactly the declared per-row shape `dims` (`[1]` for a scalar, which may also be stored
/// unwrapped). Nulls are refused: LeRobot's features are never nullable.
pub(crate) fn flatten<T: Leaf>(array: &dyn Array, dims: &[usize], out: &mut Vec<T>) -> Result<(), String> {
    if let Some(row) = first_null(array) {
        return Err(format!("null value at row {row}"));
    }
    match array.data_type() {
        DataType::List(_) => flatten_list(array.as_list::<i32>(), dims, out),
        DataType::LargeList(_) => flatten_list(array.as_list::<i64>(), dims, out),
        DataType::FixedSizeList(_, size) => {
            let list = array.as_fixed_size_list();
            let (&expected, rest) = dims.split_first().ok_or("more list nesting than the declared shape")?;
            let size = usize::try_from(*size).map_err(|_| "negative list size")?;
            if size != expected {
                return Err(format!("rows hold {size} values, the declared shape says {expected}"));
            }
            flatten(list.values().as_ref(), rest, out)
        }
        _ => {
            let per_row: usize = dims.iter().product();
            if per_row != 1 {
                return Err(format!("rows hold 1 value, the declared shape says {per_row} ({dims:?})"));
            }
            T::extend_from(array, out)
        }
    }
}

fn flatten_list<O: OffsetSizeTrait, T: Leaf>(
    list: &arrow_array::GenericListArray<O>,
    dims: &[usize],
    out: &mut Vec<T>,
) -> Result<(), String> {
    let (&expected, rest) = dims.split_first().ok_or("more list nesting than the declared shape")?;
    let offsets = list.value_offsets();
    for (row, pair) in offsets.windows(2).enumerate() {
        let len = (pair[1] - pair[0]).as_usize();
        if len != expected {
            return Err(format!("row {row} holds {len} values, the declared shape says {expected}"));
        }
    }
    let start = offsets.first().map_or(0, |o| o.as_usize());
    let end = offsets.last().map_or(0, |o| o.as_usize());
    let values: ArrayRef = list.values().slice(start, end - start);
    flatten(values.as_ref(), rest, out)
}

fn first_null(array: &dyn Array) -> Option<usize> {
    if array.null_count() == 0 {
        return None;
    }
    (0..array.len()).find(|&i| array.is_null(i))
}

/// Appends the strings of a `Utf8`, `LargeUtf8` or `Utf8View` array.
pub(crate) fn strings(array: &dyn Array, out: &mut Vec<String>) -> Result<(), String> {
    if let Some(row) = first_null(array) {
        return Err(format!("null string at row {row}"));
    }
    match array.data_type() {
        DataType::Utf8 => out.extend(array.as_string::<i32>().iter().map(|s| s.unwrap_or_default().to_string())),
        DataType::LargeUtf8 => out.extend(array.as_string::<i64>().iter().map(|s| s.unwrap_or_default().to_string())),
        DataType::Utf8View => out.extend(array.as_string_view().iter().map(|s| s.unwrap_or_default().to_string())),
        other => return Err(format!("expected strings, found {other}")),
    }
    Ok(())
}

/// Appends one list of strings per row of a `List<Utf8>` (or large/view variant) array.
pub(crate) fn string_lists(array: &dyn Array, out: &mut Vec<Vec<String>>) -> Result<(), String> {
    if let Some(row) = first_null(array) {
        return Err(format!("null list at row {row}"));
    }
    let (offsets, values) = match array.data_type() {
        DataType::List(_) => list_parts(array.as_list::<i32>()),
        DataType::LargeList(_) => list_parts(array.as_list::<i64>()),
        other => return Err(format!("expected a list of strings, found {other}")),
    };
    let mut all = Vec::new();
    strings(values.as_ref(), &mut all)?;
    for pair in offsets.windows(2) {
        out.push(all[pair[0]..pair[1]].to_vec());
    }
    Ok(())
}

/// A list array's row offsets, rebased to 0, and the child values they index.
fn list_parts<O: OffsetSizeTrait>(list: &arrow_array::GenericListArray<O>) -> (Vec<usize>, ArrayRef) {
    let offsets = list.value_offsets();
    let base = offsets.first().map_or(0, |o| o.as_usize());
    let rebased: Vec<usize> = offsets.iter().map(|o| o.as_usize() - base).collect();
    let n = rebased.last().copied().unwrap_or(0);
    (rebased, list.values().slice(base, n))
}

/// Appends the encoded image bytes of a `struct{bytes, path}` column (LeRobot's `Image()`
/// feature) to `blob`, with one end offset per row in `ends`.
pub(crate) fn image_bytes(array: &dyn Array, blob: &mut Vec<u8>, ends: &mut Vec<usize>) -> Result<(), String> {
    if let Some(row) = first_null(array) {
        return Err(format!("null image at row {row}"));
    }
    let DataType::Struct(_) = array.data_type() else {
        return Err(format!("expected struct<bytes, path>, found {}", array.data_type()));
    };
    let column = array.as_struct().column_by_name("bytes").ok_or("the image struct has no `bytes` field")?;
    let mut push = |row: usize, bytes: Option<&[u8]>| -> Result<(), String> {
        let bytes = bytes.filter(|b| !b.is_empty()).ok_or_else(|| format!("row {row} has no image bytes"))?;
        blob.extend_from_slice(bytes);
        ends.push(blob.len());
        Ok(())
    };
    match column.data_type() {
        DataType::Binary => column.as_binary::<i32>().iter().enumerate().try_for_each(|(r, b)| push(r, b)),
        DataType::LargeBinary => column.as_binary::<i64>().iter().enumerate().try_for_each(|(r, b)| push(r, b)),
        DataType::BinaryView => column.as_binary_view().iter().enumerate().try_for_each(|(r, b)| push(r, b)),
        other => Err(format!("image `bytes` must be binary, found {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{FixedSizeListBuilder, Float64Builder, ListBuilder};
    use arrow_array::{Float32Array, Int32Array};

    #[test]
    fn fixed_size_and_variable_lists_flatten_alike() {
        let mut fixed = FixedSizeListBuilder::new(Float64Builder::new(), 2);
        let mut var = ListBuilder::new(Float64Builder::new());
        for row in [[1.0, 2.0], [3.0, 4.5]] {
            fixed.values().append_slice(&row);
            fixed.append(true);
            var.values().append_slice(&row);
            var.append(true);
        }
        let (fixed, var) = (fixed.finish(), var.finish());
        let mut a: Vec<f32> = Vec::new();
        let mut b: Vec<f32> = Vec::new();
        flatten(&fixed, &[2], &mut a).unwrap();
        flatten(&var, &[2], &mut b).unwrap();
        assert_eq!(a, vec![1.0, 2.0, 3.0, 4.5]);
        assert_eq!(a, b);
        // A sliced list array keeps only its own rows.
        let mut c: Vec<f32> = Vec::new();
        flatten(&var.slice(1, 1), &[2], &mut c).unwrap();
        assert_eq!(c, vec![3.0, 4.5]);
    }

    #[test]
    fn wrong_widths_and_nulls_are_errors() {
        let mut var = ListBuilder::new(Float64Builder::new());
        var.values().append_slice(&[1.0, 2.0, 3.0]);
        var.append(true);
        let err = flatten::<f32>(&var.finish(), &[2], &mut Vec::new()).unwrap_err();
        assert!(err.contains("row 0 holds 3 values"), "{err}");
        let scalars = Float32Array::from(vec![Some(1.0), None]);
        assert!(flatten::<f32>(&scalars, &[1], &mut Vec::new()).unwrap_err().contains("null"));
        let ints = Int32Array::from(vec![1, 2]);
        let mut out: Vec<i64> = Vec::new();
        flatten(&ints, &[1], &mut out).unwrap();
        assert_eq!(out, vec![1, 2]);
        assert!(flatten::<f32>(&ints, &[1], &mut Vec::new()).unwrap_err().contains("expected floats"));
    }
}
