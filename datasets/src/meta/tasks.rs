//! The task table: `task_index` → task string.
//!
//! v2.1 writes `meta/tasks.jsonl`; v3.0 writes `meta/tasks.parquet` from a pandas DataFrame
//! whose index is the task string: a `task` column (pandas' named index) or
//! `__index_level_0__` (an unnamed one), beside `task_index`.

use std::path::Path;

use crate::error::{Error, Result};
use crate::meta::info::DatasetInfo;
use crate::meta::json::{Obj, parse_json};
use crate::table::parquet_file::ParquetFile;

/// Where v2.1 keeps its tasks.
pub const TASKS_JSONL: &str = "meta/tasks.jsonl";
/// Where v3.0 keeps its tasks.
pub const TASKS_PARQUET: &str = "meta/tasks.parquet";

/// Reads the tasks, ordered so that `tasks[task_index]` is the task's string.
pub fn read_tasks(root: &Path, info: &DatasetInfo) -> Result<Vec<String>> {
    let (path, mut pairs) = if info.version.is_v3() {
        let path = root.join(TASKS_PARQUET);
        let table = ParquetFile::read(&path, |_| true)?;
        let indices: Vec<i64> = table.scalars("task_index")?;
        let column = ["task", "__index_level_0__"]
            .into_iter()
            .find(|c| table.has(c))
            .ok_or_else(|| Error::field(&path, "task", "column missing (neither `task` nor `__index_level_0__`)"))?;
        let names = table.strings(column)?;
        (path, indices.into_iter().zip(names).collect::<Vec<_>>())
    } else {
        let path = root.join(TASKS_JSONL);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let mut pairs = Vec::new();
        for (line_no, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let value = parse_json(&path, line)?;
            let obj = Obj::new(&path, &format!("line {}", line_no + 1), &value)?;
            pairs.push((obj.req_i64("task_index")?, obj.req_str("task")?.to_string()));
        }
        (path, pairs)
    };
    pairs.sort_by_key(|(i, _)| *i);
    for (position, (index, _)) in pairs.iter().enumerate() {
        if usize::try_from(*index).ok() != Some(position) {
            return Err(Error::field(
                &path,
                "task_index",
                format!("expected task {position}, found {index}: task indices must run from 0 without gaps"),
            ));
        }
    }
    Ok(pairs.into_iter().map(|(_, task)| task).collect())
}
