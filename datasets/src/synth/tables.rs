//! Arrow arrays with the types LeRobot's writers produce, and parquet files made of them.

use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{FixedSizeListBuilder, Float32Builder};
use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Float32Array, Float64Array, Int64Array, ListArray, RecordBatch, StringArray,
    StructArray,
};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field, Fields, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::error::{Error, Result};

/// `fixed_size_list<element: float>[width]`, as LeRobot's recorder writes vectors.
pub(crate) fn f32_vectors(values: &[f32], width: usize) -> ArrayRef {
    let mut builder = FixedSizeListBuilder::new(Float32Builder::new(), width as i32);
    for row in values.chunks_exact(width) {
        builder.values().append_slice(row);
        builder.append(true);
    }
    Arc::new(builder.finish())
}

/// A float32 column.
pub(crate) fn f32_scalars(values: Vec<f32>) -> ArrayRef {
    Arc::new(Float32Array::from(values))
}

/// A float64 column.
pub(crate) fn f64_scalars(values: Vec<f64>) -> ArrayRef {
    Arc::new(Float64Array::from(values))
}

/// An int64 column.
pub(crate) fn i64_scalars(values: Vec<i64>) -> ArrayRef {
    Arc::new(Int64Array::from(values))
}

/// A bool column.
pub(crate) fn bools(values: Vec<bool>) -> ArrayRef {
    Arc::new(BooleanArray::from(values))
}

/// `struct<bytes: binary, path: string>`, LeRobot's `Image()` feature.
pub(crate) fn images(encoded: &[Vec<u8>], names: &[String]) -> ArrayRef {
    let bytes: ArrayRef = Arc::new(BinaryArray::from_iter_values(encoded.iter()));
    let paths: ArrayRef = Arc::new(StringArray::from_iter_values(names.iter()));
    let fields =
        Fields::from(vec![Field::new("bytes", DataType::Binary, true), Field::new("path", DataType::Utf8, true)]);
    Arc::new(StructArray::new(fields, vec![bytes, paths], None))
}

/// `list<string>` with one list per row.
pub(crate) fn string_lists(rows: &[Vec<String>]) -> ArrayRef {
    let values: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().flatten()));
    let offsets = OffsetBuffer::from_lengths(rows.iter().map(Vec::len));
    Arc::new(ListArray::new(Arc::new(Field::new("element", DataType::Utf8, true)), offsets, values, None))
}

/// Float64 values nested in lists of `shape` per row (`list<double>` for a vector,
/// `list<list<list<double>>>` for a `(3, 1, 1)` camera statistic).
pub(crate) fn nested_f64(values: Vec<f64>, rows: usize, shape: &[usize]) -> ArrayRef {
    nest(Arc::new(Float64Array::from(values)), rows, shape)
}

/// Int64 values nested like [`nested_f64`] (LeRobot's `count` statistics).
pub(crate) fn nested_i64(values: Vec<i64>, rows: usize, shape: &[usize]) -> ArrayRef {
    nest(Arc::new(Int64Array::from(values)), rows, shape)
}

fn nest(mut array: ArrayRef, rows: usize, shape: &[usize]) -> ArrayRef {
    for depth in (0..shape.len()).rev() {
        let lists = rows * shape[..depth].iter().product::<usize>();
        let offsets = OffsetBuffer::from_lengths(std::iter::repeat_n(shape[depth], lists));
        let field = Arc::new(Field::new("element", array.data_type().clone(), true));
        array = Arc::new(ListArray::new(field, offsets, array, None));
    }
    array
}

/// Writes `batches` to `path` (snappy, one row group per batch, as LeRobot's recorder writes
/// one per episode), with optional key-value metadata.
pub(crate) fn write_parquet(path: &Path, batches: &[RecordBatch], metadata: Vec<(String, String)>) -> Result<()> {
    let first = batches.first().ok_or_else(|| Error::parquet(path, "nothing to write"))?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let kv: Vec<KeyValue> = metadata.into_iter().map(|(k, v)| KeyValue::new(k, v)).collect();
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_key_value_metadata((!kv.is_empty()).then_some(kv))
        .build();
    let mut writer = ArrowWriter::try_new(file, first.schema(), Some(props)).map_err(|e| Error::parquet(path, e))?;
    for batch in batches {
        writer.write(batch).map_err(|e| Error::parquet(path, e))?;
        writer.flush().map_err(|e| Error::parquet(path, e))?;
    }
    writer.close().map_err(|e| Error::parquet(path, e))?;
    Ok(())
}

/// A record batch of named columns.
pub(crate) fn batch(path: &Path, columns: Vec<(String, ArrayRef)>) -> Result<RecordBatch> {
    let fields: Vec<Field> = columns.iter().map(|(name, a)| Field::new(name, a.data_type().clone(), true)).collect();
    let schema = Arc::new(Schema::new(fields));
    RecordBatch::try_new(schema, columns.into_iter().map(|(_, a)| a).collect()).map_err(|e| Error::parquet(path, e))
}
