//! Reading whole small parquet files (metadata tables) into record batches, and pulling typed
//! columns out of them with errors that name the file and the column.

use std::cell::Cell;
use std::path::Path;

use arrow_array::RecordBatch;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::{Error, Result};
use crate::table::columns::{Leaf, flatten, string_lists, strings};
use crate::table::mmap::map_file;

thread_local! {
    /// Whether this thread is inside [`catch_decoder_panics`].
    static DECODING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `decode`, the parquet decoding of `path`, turning a panic inside the parquet crate (or
/// the arrow crates it calls) into an [`Error::Parquet`] naming the file. Malformed files have
/// made them panic (see `vendor/README.md`); a training run must get an error, not an abort.
pub(crate) fn catch_decoder_panics<T>(path: &Path, decode: impl FnOnce() -> Result<T>) -> Result<T> {
    DECODING.set(true);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(decode));
    DECODING.set(false);
    result.unwrap_or_else(|payload| {
        let message = crate::error::panic_message(payload.as_ref()).unwrap_or_default();
        Err(Error::parquet(path, format!("the decoder gave up on malformed data ({message})")))
    })
}

/// Whether a panic raised now will be caught by [`catch_decoder_panics`] (for the fuzz targets'
/// panic hook).
#[cfg(feature = "fuzzing")]
pub(crate) fn inside_decoder_guard() -> bool {
    DECODING.get()
}

/// A parquet file read into memory, restricted to the columns `keep` accepts.
pub(crate) struct ParquetFile<'a> {
    pub(crate) path: &'a Path,
    pub(crate) batches: Vec<RecordBatch>,
    pub(crate) names: Vec<String>,
}

impl<'a> ParquetFile<'a> {
    /// Reads the top-level columns of `path` whose names `keep` accepts.
    pub(crate) fn read(path: &'a Path, keep: impl Fn(&str) -> bool) -> Result<Self> {
        let bytes = map_file(path)?;
        catch_decoder_panics(path, || {
            let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| Error::parquet(path, e))?;
            let schema = builder.schema().clone();
            let roots: Vec<usize> = (0..schema.fields().len()).filter(|&i| keep(schema.field(i).name())).collect();
            let names = roots.iter().map(|&i| schema.field(i).name().clone()).collect();
            let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
            let reader = builder.with_projection(mask).build().map_err(|e| Error::parquet(path, e))?;
            let batches = reader.collect::<Result<Vec<_>, _>>().map_err(|e| Error::parquet(path, e))?;
            Ok(ParquetFile { path, batches, names })
        })
    }

    /// The number of rows.
    pub(crate) fn rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    /// Whether the file has column `name`.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    /// A scalar numeric column.
    pub(crate) fn scalars<T: Leaf>(&self, name: &str) -> Result<Vec<T>> {
        let mut out = Vec::with_capacity(self.rows());
        for batch in &self.batches {
            let array = batch.column_by_name(name).ok_or_else(|| Error::field(self.path, name, "column missing"))?;
            flatten(array.as_ref(), &[1], &mut out).map_err(|m| Error::field(self.path, name, m))?;
        }
        Ok(out)
    }

    /// A string column.
    pub(crate) fn strings(&self, name: &str) -> Result<Vec<String>> {
        let mut out = Vec::with_capacity(self.rows());
        for batch in &self.batches {
            let array = batch.column_by_name(name).ok_or_else(|| Error::field(self.path, name, "column missing"))?;
            strings(array.as_ref(), &mut out).map_err(|m| Error::field(self.path, name, m))?;
        }
        Ok(out)
    }

    /// A list-of-strings column.
    pub(crate) fn string_lists(&self, name: &str) -> Result<Vec<Vec<String>>> {
        let mut out = Vec::with_capacity(self.rows());
        for batch in &self.batches {
            let array = batch.column_by_name(name).ok_or_else(|| Error::field(self.path, name, "column missing"))?;
            string_lists(array.as_ref(), &mut out).map_err(|m| Error::field(self.path, name, m))?;
        }
        Ok(out)
    }
}

/// The `*.parquet` files two directory levels below `dir` (`dir/chunk-*/file-*.parquet`), in
/// sorted order, as LeRobot's `glob("*/*.parquet")` lists them.
pub(crate) fn nested_parquet_files(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let mut files = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries {
        let sub = entry.map_err(|e| Error::io(dir, e))?.path();
        if !sub.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&sub).map_err(|e| Error::io(&sub, e))? {
            let file = file.map_err(|e| Error::io(&sub, e))?.path();
            if file.extension().is_some_and(|e| e == "parquet") {
                files.push(file);
            }
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_while_decoding_becomes_an_error_naming_the_file() {
        let path = Path::new("data/chunk-000/file-000.parquet");
        let result: Result<()> = catch_decoder_panics(path, || panic!("index out of bounds"));
        let message = result.expect_err("the panic is an error").to_string();
        assert!(message.contains("file-000.parquet") && message.contains("index out of bounds"), "{message}");
        assert_eq!(catch_decoder_panics(path, || Ok(7)).unwrap(), 7);
    }
}
