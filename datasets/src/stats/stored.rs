//! Stored statistics: reading them (v3.0 `stats.json`, v2.1 aggregated from
//! `episodes_stats.jsonl`), aggregating them as LeRobot does, and writing them back.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::meta::info::DatasetInfo;
use crate::meta::json::{Obj, as_f64, describe, parse_json, read_json};
use crate::meta::version::CodebaseVersion;

/// Where v3.0 (and v2.0) keep their global statistics.
pub const STATS_JSON: &str = "meta/stats.json";
/// Where v2.1 keeps its per-episode statistics.
pub const EPISODES_STATS_JSONL: &str = "meta/episodes_stats.jsonl";

/// One statistic of one feature: an n-dimensional array (e.g. `(D,)` for a vector feature,
/// `(3, 1, 1)` for a camera, `(1,)` for `count`).
#[derive(Debug, Clone, PartialEq)]
pub struct StatArray {
    /// The array's shape.
    pub shape: Vec<usize>,
    /// Its values, row-major.
    pub values: Vec<f64>,
}

impl StatArray {
    /// A 1-D array.
    pub fn vector(values: Vec<f64>) -> Self {
        Self { shape: vec![values.len()], values }
    }

    /// A `(C, 1, 1)` array, as LeRobot stores camera statistics.
    pub fn per_channel(values: Vec<f64>) -> Self {
        Self { shape: vec![values.len(), 1, 1], values }
    }

    /// Parses a (nested) JSON list or a bare number.
    fn from_json(value: &Value) -> std::result::Result<Self, String> {
        let mut shape = Vec::new();
        let mut probe = value;
        while let Value::Array(items) = probe {
            shape.push(items.len());
            match items.first() {
                Some(first) => probe = first,
                None => break,
            }
        }
        if shape.is_empty() {
            shape.push(1);
        }
        let mut values = Vec::with_capacity(shape.iter().product());
        collect_numbers(value, &mut values)?;
        if values.len() != shape.iter().product::<usize>() {
            return Err(format!("ragged nested list {}", describe(value)));
        }
        Ok(Self { shape, values })
    }

    /// The array as nested JSON lists.
    pub fn to_json(&self) -> Value {
        fn nest(shape: &[usize], values: &[f64]) -> Value {
            match shape {
                [] | [_] => Value::Array(values.iter().map(|&v| json_number(v)).collect()),
                [n, rest @ ..] => {
                    let step = values.len() / n.max(&1);
                    Value::Array(values.chunks(step.max(1)).take(*n).map(|c| nest(rest, c)).collect())
                }
            }
        }
        nest(&self.shape, &self.values)
    }
}

/// A JSON number, or Python's non-finite tokens' stand-ins would be lost: non-finite values
/// become `null` (they are refused on read anyway).
fn json_number(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        // Integral values (counts, indices) print without a fraction, as numpy ints do.
        serde_json::Number::from_f64(v).map_or(Value::Null, |_| Value::from(v as i64))
    } else {
        serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
    }
}

fn collect_numbers(value: &Value, out: &mut Vec<f64>) -> std::result::Result<(), String> {
    match value {
        Value::Array(items) => items.iter().try_for_each(|v| collect_numbers(v, out)),
        other => {
            out.push(as_f64(other).ok_or_else(|| format!("expected numbers, found {}", describe(other)))?);
            Ok(())
        }
    }
}

/// The statistics of one feature, by name (`min`, `max`, `mean`, `std`, `count`, `q01`, ...).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FeatureStats(pub BTreeMap<String, StatArray>);

impl FeatureStats {
    /// The statistic `name`.
    pub fn get(&self, name: &str) -> Option<&StatArray> {
        self.0.get(name)
    }

    /// The number of samples the statistics were computed over.
    pub fn count(&self) -> Option<f64> {
        self.get("count").and_then(|c| c.values.first().copied())
    }
}

/// The statistics of a dataset, by feature key.
pub type Stats = BTreeMap<String, FeatureStats>;

/// Reads the dataset's statistics as LeRobot's loader sees them: v3.0 and v2.0 read
/// `stats.json`; v2.1 aggregates `episodes_stats.jsonl`. A dataset without statistics gives an
/// empty map (training then needs `datasets stats --write`).
pub fn read_stats(root: &Path, info: &DatasetInfo) -> Result<Stats> {
    match info.version {
        CodebaseVersion::V3_0 | CodebaseVersion::V2_0 => {
            let path = root.join(STATS_JSON);
            if !path.exists() {
                return Ok(Stats::new());
            }
            parse_stats(&path, &read_json(&path)?)
        }
        CodebaseVersion::V2_1 => {
            let path = root.join(EPISODES_STATS_JSONL);
            if !path.exists() {
                return Ok(Stats::new());
            }
            let episodes = read_episode_stats(&path)?;
            aggregate(&episodes.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>())
                .map_err(|m| Error::field(&path, "stats", m))
        }
    }
}

/// Reads `episodes_stats.jsonl`: `(episode_index, stats)` per line.
pub fn read_episode_stats(path: &Path) -> Result<Vec<(usize, Stats)>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let mut out = Vec::new();
    for (line_no, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let value = parse_json(path, line)?;
        let prefix = format!("line {}", line_no + 1);
        let obj = Obj::new(path, &prefix, &value)?;
        let index = obj.req_usize("episode_index")?;
        let stats = parse_stats_obj(&obj.req_obj("stats")?)?;
        out.push((index, stats));
    }
    out.sort_by_key(|(i, _)| *i);
    Ok(out)
}

/// Parses a `{feature: {stat: array}}` object.
pub fn parse_stats(path: &Path, value: &Value) -> Result<Stats> {
    parse_stats_obj(&Obj::new(path, "", value)?)
}

fn parse_stats_obj(obj: &Obj<'_>) -> Result<Stats> {
    let mut stats = Stats::new();
    for feature in obj.map().keys() {
        let entry_obj = obj.req_obj(feature)?;
        let mut feature_stats = FeatureStats::default();
        for (name, value) in entry_obj.map() {
            let array = StatArray::from_json(value).map_err(|m| entry_obj.error(name, m))?;
            feature_stats.0.insert(name.clone(), array);
        }
        stats.insert(feature.clone(), feature_stats);
    }
    Ok(stats)
}

/// `{feature: {stat: nested lists}}`, as LeRobot writes `stats.json`.
pub fn stats_to_json(stats: &Stats) -> Value {
    let mut top = Map::new();
    for (feature, entry) in stats {
        let inner: Map<String, Value> = entry.0.iter().map(|(k, v)| (k.clone(), v.to_json())).collect();
        top.insert(feature.clone(), Value::Object(inner));
    }
    Value::Object(top)
}

/// Every non-finite value, as `(feature.stat, position)`; training refuses such statistics.
pub fn non_finite(stats: &Stats) -> Vec<(String, usize)> {
    let mut bad = Vec::new();
    for (feature, entry) in stats {
        for (name, array) in &entry.0 {
            if let Some(i) = array.values.iter().position(|v| !v.is_finite()) {
                bad.push((format!("{feature}.{name}"), i));
            }
        }
    }
    bad
}

/// Aggregates per-episode statistics as LeRobot 0.6.1 does: min of mins, max of maxes,
/// count-weighted mean, the parallel-variance std
/// `sqrt(Σ n·(std² + (mean − total_mean)²) / Σ n)`, count-weighted quantiles, summed counts.
pub fn aggregate(episodes: &[Stats]) -> std::result::Result<Stats, String> {
    let mut keys: Vec<&String> = episodes.iter().flat_map(|s| s.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = Stats::new();
    for key in keys {
        let parts: Vec<&FeatureStats> = episodes.iter().filter_map(|s| s.get(key)).collect();
        out.insert(key.clone(), aggregate_feature(&parts).map_err(|m| format!("{key}: {m}"))?);
    }
    Ok(out)
}

fn aggregate_feature(parts: &[&FeatureStats]) -> std::result::Result<FeatureStats, String> {
    let stat = |p: &FeatureStats, name: &str| -> std::result::Result<StatArray, String> {
        p.get(name).cloned().ok_or_else(|| format!("an episode lacks `{name}`"))
    };
    let first = parts.first().ok_or("no episodes")?;
    let shape = stat(first, "mean")?.shape;
    let n = shape.iter().product::<usize>();
    let counts: Vec<f64> =
        parts.iter().map(|p| p.count().ok_or("an episode lacks `count`")).collect::<std::result::Result<_, _>>()?;
    let total: f64 = counts.iter().sum();
    if total <= 0.0 {
        return Err("total count is zero".into());
    }
    let arrays = |name: &str| -> std::result::Result<Vec<StatArray>, String> {
        let arrays: Vec<StatArray> = parts.iter().map(|p| stat(p, name)).collect::<std::result::Result<_, _>>()?;
        if let Some(a) = arrays.iter().find(|a| a.values.len() != n) {
            return Err(format!("`{name}` has shape {:?} in one episode and {shape:?} in another", a.shape));
        }
        Ok(arrays)
    };
    let (means, stds) = (arrays("mean")?, arrays("std")?);
    let mut mean = vec![0.0; n];
    for (m, &c) in means.iter().zip(&counts) {
        mean.iter_mut().zip(&m.values).for_each(|(acc, v)| *acc += v * c);
    }
    mean.iter_mut().for_each(|v| *v /= total);
    let mut var = vec![0.0; n];
    for ((m, s), &c) in means.iter().zip(&stds).zip(&counts) {
        for i in 0..n {
            let d = m.values[i] - mean[i];
            var[i] += (s.values[i] * s.values[i] + d * d) * c;
        }
    }
    let std: Vec<f64> = var.iter().map(|v| (v / total).sqrt()).collect();
    let fold = |name: &str, f: fn(f64, f64) -> f64| -> std::result::Result<Vec<f64>, String> {
        let arrays = arrays(name)?;
        Ok((0..n).map(|i| arrays.iter().map(|a| a.values[i]).reduce(f).unwrap_or(f64::NAN)).collect())
    };
    let with_shape = |values: Vec<f64>| StatArray { shape: shape.clone(), values };
    let mut out = FeatureStats::default();
    out.0.insert("min".into(), with_shape(fold("min", f64::min)?));
    out.0.insert("max".into(), with_shape(fold("max", f64::max)?));
    out.0.insert("mean".into(), with_shape(mean));
    out.0.insert("std".into(), with_shape(std));
    out.0.insert("count".into(), StatArray::vector(vec![total]));
    let quantiles = first.0.keys().filter(|k| is_quantile_key(k));
    for q in quantiles {
        if parts.iter().all(|p| p.get(q).is_some()) {
            let arrays = arrays(q)?;
            let mut values = vec![0.0; n];
            for (a, &c) in arrays.iter().zip(&counts) {
                values.iter_mut().zip(&a.values).for_each(|(acc, v)| *acc += v * c);
            }
            values.iter_mut().for_each(|v| *v /= total);
            out.0.insert(q.clone(), with_shape(values));
        }
    }
    Ok(out)
}

/// `q01`, `q10`, `q50`, ...
pub fn is_quantile_key(name: &str) -> bool {
    name.strip_prefix('q').is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fs(pairs: &[(&str, Vec<f64>)]) -> FeatureStats {
        FeatureStats(pairs.iter().map(|(k, v)| (k.to_string(), StatArray::vector(v.clone()))).collect())
    }

    #[test]
    fn aggregation_matches_pooled_statistics() {
        // Two episodes: [1, 2, 3] and [10, 20].
        let a = [1.0, 2.0, 3.0];
        let b = [10.0, 20.0];
        let stats = |x: &[f64]| {
            let n = x.len() as f64;
            let mean = x.iter().sum::<f64>() / n;
            let std = (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
            let mut s = Stats::new();
            s.insert(
                "x".into(),
                fs(&[
                    ("min", vec![x[0]]),
                    ("max", vec![x[x.len() - 1]]),
                    ("mean", vec![mean]),
                    ("std", vec![std]),
                    ("count", vec![n]),
                    ("q50", vec![mean]),
                ]),
            );
            s
        };
        let agg = aggregate(&[stats(&a), stats(&b)]).unwrap();
        let all: Vec<f64> = a.iter().chain(&b).copied().collect();
        let pooled = &stats(&all)["x"];
        let x = &agg["x"];
        for name in ["mean", "std", "min", "max", "count"] {
            let (got, want) = (x.get(name).unwrap().values[0], pooled.get(name).unwrap().values[0]);
            assert!((got - want).abs() < 1e-12, "{name}: {got} vs {want}");
        }
        // Quantiles are averaged with count weights: (2*3 + 15*2) / 5.
        assert!((x.get("q50").unwrap().values[0] - 7.2).abs() < 1e-12);
    }

    #[test]
    fn camera_stats_keep_their_shape_and_non_finite_values_are_found() {
        let text = r#"{"observation.image": {"mean": [[[0.5]], [[0.4]], [[NaN]]], "count": [10]}}"#;
        let path = Path::new("meta/stats.json");
        let stats = parse_stats(path, &parse_json(path, text).unwrap()).unwrap();
        let mean = stats["observation.image"].get("mean").unwrap();
        assert_eq!(mean.shape, vec![3, 1, 1]);
        assert_eq!(non_finite(&stats), vec![("observation.image.mean".to_string(), 2)]);
        let back = stats_to_json(&stats);
        assert_eq!(back["observation.image"]["mean"][1], serde_json::json!([[0.4]]));
        assert_eq!(back["observation.image"]["count"], serde_json::json!([10]));
    }
}
