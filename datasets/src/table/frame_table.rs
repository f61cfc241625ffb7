//! The frame table: every parquet column of the dataset, read once from memory-mapped files
//! into contiguous, row-major columns (row `i` = global frame `index` `i`).

use std::path::{Path, PathBuf};

use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::meta::features::{Dtype, Feature, FeatureKey};
use crate::source::FileSource;
use crate::table::columns::{flatten, image_bytes, strings};
use crate::table::parquet_file::catch_decoder_panics;

/// Encoded images (PNG, JPEG, ...) of an image column, back to back.
#[derive(Debug, Clone, Default)]
pub struct EncodedImages {
    blob: Vec<u8>,
    ends: Vec<usize>,
}

impl EncodedImages {
    /// The encoded bytes of `row`.
    pub fn get(&self, row: usize) -> &[u8] {
        let start = if row == 0 { 0 } else { self.ends[row - 1] };
        &self.blob[start..self.ends[row]]
    }

    /// The number of images.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are no images.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// `rows` empty entries: rows not read.
    fn append_unread(&mut self, rows: usize) {
        let end = self.blob.len();
        self.ends.extend(std::iter::repeat_n(end, rows));
    }

    fn append(&mut self, other: EncodedImages) {
        let base = self.blob.len();
        self.blob.extend_from_slice(&other.blob);
        self.ends.extend(other.ends.iter().map(|e| e + base));
    }
}

/// The values of one column.
#[derive(Debug, Clone)]
pub enum ColumnValues {
    /// Floats (float32 and float64 sources alike), `width` per row.
    F32(Vec<f32>),
    /// Integers of any width, `width` per row.
    I64(Vec<i64>),
    /// Booleans, `width` per row.
    Bool(Vec<bool>),
    /// One string per row.
    Str(Vec<String>),
    /// One encoded image per row.
    Image(EncodedImages),
}

/// One column of the frame table.
#[derive(Debug, Clone)]
pub struct Column {
    /// Values per row (the product of the declared shape; 1 for scalars, strings and images).
    pub width: usize,
    /// The values, row-major.
    pub values: ColumnValues,
}

impl Column {
    /// The floats of `row`, if this is a float column.
    pub fn f32_row(&self, row: usize) -> Option<&[f32]> {
        match &self.values {
            ColumnValues::F32(v) => v.get(row * self.width..(row + 1) * self.width),
            _ => None,
        }
    }

    /// All values, if this is an integer column.
    pub fn as_i64(&self) -> Option<&[i64]> {
        match &self.values {
            ColumnValues::I64(v) => Some(v),
            _ => None,
        }
    }

    /// All values, if this is a float column.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.values {
            ColumnValues::F32(v) => Some(v),
            _ => None,
        }
    }

    fn empty_like(feature: &Feature) -> Result<Self, String> {
        let values = match &feature.dtype {
            Dtype::Float32 | Dtype::Float64 => ColumnValues::F32(Vec::new()),
            Dtype::Int(_) => ColumnValues::I64(Vec::new()),
            Dtype::Bool => ColumnValues::Bool(Vec::new()),
            Dtype::String => ColumnValues::Str(Vec::new()),
            Dtype::Image => ColumnValues::Image(EncodedImages::default()),
            Dtype::Video => return Err("video features have no parquet column".into()),
            Dtype::Other(d) => return Err(format!("dtype {d:?} is not supported")),
        };
        let width = if matches!(feature.dtype, Dtype::String | Dtype::Image) { 1 } else { feature.width() };
        Ok(Column { width, values })
    }

    fn len(&self) -> usize {
        match &self.values {
            ColumnValues::F32(v) => v.len() / self.width,
            ColumnValues::I64(v) => v.len() / self.width,
            ColumnValues::Bool(v) => v.len() / self.width,
            ColumnValues::Str(v) => v.len(),
            ColumnValues::Image(v) => v.len(),
        }
    }

    fn append(&mut self, other: Column) {
        match (&mut self.values, other.values) {
            (ColumnValues::F32(a), ColumnValues::F32(b)) => a.extend_from_slice(&b),
            (ColumnValues::I64(a), ColumnValues::I64(b)) => a.extend_from_slice(&b),
            (ColumnValues::Bool(a), ColumnValues::Bool(b)) => a.extend_from_slice(&b),
            (ColumnValues::Str(a), ColumnValues::Str(b)) => a.extend(b),
            (ColumnValues::Image(a), ColumnValues::Image(b)) => a.append(b),
            _ => unreachable!("columns of one feature share their type"),
        }
    }

    /// Appends `rows` rows of zeros (empty strings and images): rows of files not read.
    fn append_unread(&mut self, rows: usize) {
        let n = rows * self.width;
        match &mut self.values {
            ColumnValues::F32(v) => v.resize(v.len() + n, 0.0),
            ColumnValues::I64(v) => v.resize(v.len() + n, 0),
            ColumnValues::Bool(v) => v.resize(v.len() + n, false),
            ColumnValues::Str(v) => v.resize(v.len() + rows, String::new()),
            ColumnValues::Image(v) => v.append_unread(rows),
        }
    }

    /// Appends the arrow array's values, checking the declared shape.
    fn extend_from_arrow(&mut self, feature: &Feature, array: &dyn arrow_array::Array) -> Result<(), String> {
        match &mut self.values {
            ColumnValues::F32(v) => flatten(array, &feature.shape, v),
            ColumnValues::I64(v) => flatten(array, &feature.shape, v),
            ColumnValues::Bool(v) => flatten(array, &feature.shape, v),
            ColumnValues::Str(v) => strings(array, v),
            ColumnValues::Image(v) => image_bytes(array, &mut v.blob, &mut v.ends),
        }
    }
}

/// The parquet rows of the whole dataset, one [`Column`] per non-video feature.
#[derive(Debug, Clone)]
pub struct FrameTable {
    rows: usize,
    keys: Vec<FeatureKey>,
    columns: Vec<Column>,
    /// The file each row came from, as (first row, file) in row order.
    files: Vec<(usize, PathBuf)>,
}

impl FrameTable {
    /// Reads `features` from each of `files` (in this order, in parallel) and concatenates them.
    pub fn read(files: &[PathBuf], features: &[&Feature]) -> Result<Self> {
        Self::read_from(&FileSource::Local, files, features)
    }

    /// [`Self::read`] of files read from `source`.
    pub(crate) fn read_from(source: &FileSource, files: &[PathBuf], features: &[&Feature]) -> Result<Self> {
        let parts = read_files(source, files.iter().map(PathBuf::as_path), features)?;
        let mut rows = 0;
        let placed = parts
            .into_iter()
            .zip(files)
            .map(|((file_rows, columns), path)| {
                rows += file_rows;
                (path, rows - file_rows..rows, columns)
            })
            .collect();
        Self::from_placed(placed, rows, features)
    }

    /// Reads `features` from each of `files`, each the global rows of its range (ascending,
    /// disjoint), into a table of `total` rows: the rows of files not read are zeros (empty
    /// strings and images), which the dataset never serves. A file with another number of rows
    /// than its range is an error naming it.
    pub fn read_placed(
        files: &[(PathBuf, std::ops::Range<usize>)],
        total: usize,
        features: &[&Feature],
    ) -> Result<Self> {
        Self::read_placed_from(&FileSource::Local, files, total, features)
    }

    /// [`Self::read_placed`] of files read from `source`.
    pub(crate) fn read_placed_from(
        source: &FileSource,
        files: &[(PathBuf, std::ops::Range<usize>)],
        total: usize,
        features: &[&Feature],
    ) -> Result<Self> {
        let parts = read_files(source, files.iter().map(|(path, _)| path.as_path()), features)?;
        let mut placed = Vec::with_capacity(files.len());
        for ((file_rows, columns), (path, range)) in parts.into_iter().zip(files) {
            if file_rows != range.len() {
                return Err(Error::field(
                    path,
                    "index",
                    format!("{file_rows} rows, where the episode table puts rows {range:?} in it"),
                ));
            }
            placed.push((path, range.clone(), columns));
        }
        Self::from_placed(placed, total, features)
    }

    /// The table of `total` rows that holds each file's columns at its range (ascending,
    /// disjoint), zeros between them.
    fn from_placed(
        placed: Vec<(&PathBuf, std::ops::Range<usize>, Vec<Column>)>,
        total: usize,
        features: &[&Feature],
    ) -> Result<Self> {
        let mut columns: Vec<Column> = features
            .iter()
            .map(|f| Column::empty_like(f).map_err(|m| Error::request(format!("feature `{}`: {m}", f.key))))
            .collect::<Result<_>>()?;
        let mut starts = Vec::with_capacity(placed.len());
        let mut rows = 0;
        for (path, range, part) in placed {
            if range.start < rows || range.end > total {
                return Err(Error::field(
                    path,
                    "index",
                    format!("rows {range:?} overlap the previous file's or pass the {total} rows of the dataset"),
                ));
            }
            for (column, piece) in columns.iter_mut().zip(part) {
                column.append_unread(range.start - rows);
                column.append(piece);
            }
            starts.push((range.start, path.clone()));
            rows = range.end;
        }
        for column in &mut columns {
            column.append_unread(total - rows);
        }
        let keys = features.iter().map(|f| f.key.clone()).collect();
        Ok(FrameTable { rows: total, keys, columns, files: starts })
    }

    /// The number of rows (frames).
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The column of feature `key`.
    pub fn column(&self, key: &str) -> Option<&Column> {
        self.keys.iter().position(|k| k.as_str() == key).map(|i| &self.columns[i])
    }

    /// The feature keys of the columns, in `info.json` order.
    pub fn keys(&self) -> &[FeatureKey] {
        &self.keys
    }

    /// The parquet file that holds `row`.
    pub fn file_of(&self, row: usize) -> &Path {
        let i = self.files.partition_point(|(start, _)| *start <= row).saturating_sub(1);
        &self.files[i].1
    }
}

/// Reads the declared columns of each of `paths`, in parallel, reporting the first bad file in
/// order, whichever thread finishes first.
fn read_files<'a>(
    source: &FileSource,
    paths: impl Iterator<Item = &'a Path>,
    features: &[&Feature],
) -> Result<Vec<(usize, Vec<Column>)>> {
    let paths: Vec<&Path> = paths.collect();
    let results: Vec<Result<(usize, Vec<Column>)>> =
        paths.par_iter().map(|path| read_file(source, path, features)).collect();
    results.into_iter().collect()
}

/// Reads the declared columns of one parquet file.
fn read_file(source: &FileSource, path: &Path, features: &[&Feature]) -> Result<(usize, Vec<Column>)> {
    let bytes = source.bytes(path)?;
    let (rows, columns) = catch_decoder_panics(path, || decode_columns(path, bytes, features))?;
    for (feature, column) in features.iter().zip(&columns) {
        if column.len() != rows {
            return Err(Error::field(path, feature.key.as_str(), format!("{} values for {rows} rows", column.len())));
        }
        // NaN or infinity in a state or an action would train on garbage without a word.
        if let ColumnValues::F32(values) = &column.values
            && let Some(at) = values.iter().position(|v| !v.is_finite())
        {
            return Err(Error::field(
                path,
                feature.key.as_str(),
                format!("non-finite value {} in row {} of the file", values[at], at / column.width.max(1)),
            ));
        }
    }
    Ok((rows, columns))
}

/// Decodes the declared columns of `path` (mapped as `bytes`) into columns, and counts its rows.
fn decode_columns(path: &Path, bytes: bytes::Bytes, features: &[&Feature]) -> Result<(usize, Vec<Column>)> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| Error::parquet(path, e))?;
    let schema = builder.schema().clone();
    let mut roots = Vec::with_capacity(features.len());
    for feature in features {
        let index = schema
            .index_of(feature.key.as_str())
            .map_err(|_| Error::field(path, feature.key.as_str(), "column missing (declared in meta/info.json)"))?;
        roots.push(index);
    }
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let reader = builder.with_projection(mask).with_batch_size(1 << 16).build().map_err(|e| Error::parquet(path, e))?;
    let mut columns: Vec<Column> = features
        .iter()
        .map(|f| Column::empty_like(f).map_err(|m| Error::field(path, f.key.as_str(), m)))
        .collect::<Result<_>>()?;
    let mut rows = 0;
    for batch in reader {
        let batch = batch.map_err(|e| Error::parquet(path, e))?;
        for (feature, column) in features.iter().zip(&mut columns) {
            let array = batch.column_by_name(feature.key.as_str()).expect("projected column is present");
            column.extend_from_arrow(feature, array.as_ref()).map_err(|m| {
                Error::field(
                    path,
                    feature.key.as_str(),
                    format!("{m} (dtype {}, shape {:?})", feature.dtype.as_str(), feature.shape),
                )
            })?;
        }
        rows += batch.num_rows();
    }
    Ok((rows, columns))
}
