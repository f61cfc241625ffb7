//! Training metrics: LeRobot's log line (`step smpl ep epch loss grdn lr updt_s data_s`, plus
//! samples/s), a CSV file, and a TensorBoard event file, all in the output folder.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::{Error, Result};

/// Metrics averaged over one logging period.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Metrics {
    /// Optimiser steps done.
    pub step: usize,
    /// Samples seen.
    pub samples: u64,
    /// Episodes seen (samples / average episode length, as LeRobot counts them).
    pub episodes: f64,
    /// Epochs seen (samples / frames).
    pub epochs: f64,
    /// Mean loss.
    pub loss: f64,
    /// Mean gradient norm (before clipping).
    pub grad_norm: f64,
    /// Learning rate of the last step.
    pub lr: f64,
    /// Mean seconds of a step's computation.
    pub update_s: f64,
    /// Mean seconds a step waited for its batch.
    pub data_s: f64,
    /// Throughput over the period.
    pub samples_per_s: f64,
    /// The f16 loss scale at the period's end (f16 training only).
    pub loss_scale: Option<f32>,
    /// Steps skipped in the period because f16 gradients overflowed.
    pub skipped: usize,
}

/// LeRobot's `format_big_number`: 1234 → `1K`, 1_600_000 → `2M`.
pub fn big_number(n: f64) -> String {
    let suffixes = ["", "K", "M", "B", "T", "Q"];
    let mut n = n;
    for suffix in suffixes {
        if n.abs() < 1000.0 {
            return format!("{n:.0}{suffix}");
        }
        n /= 1000.0;
    }
    format!("{n:.0}Q")
}

impl Metrics {
    /// The log line, as LeRobot's `MetricsTracker` prints it, plus samples/s.
    pub fn line(&self) -> String {
        let mut line = format!(
            "step:{} smpl:{} ep:{} epch:{:.2} loss:{:.3} grdn:{:.3} lr:{:.1e} updt_s:{:.3} data_s:{:.3} smp/s:{:.1}",
            big_number(self.step as f64),
            big_number(self.samples as f64),
            big_number(self.episodes),
            self.epochs,
            self.loss,
            self.grad_norm,
            self.lr,
            self.update_s,
            self.data_s,
            self.samples_per_s
        );
        if let Some(scale) = self.loss_scale {
            line += &format!(" loss_scale:{scale} skipped:{}", self.skipped);
        }
        line
    }
}

/// Appends metrics to `metrics.csv` (held-out losses to `eval_metrics.csv`) and a TensorBoard
/// event file.
pub struct MetricsWriter {
    dir: std::path::PathBuf,
    csv: BufWriter<File>,
    eval_csv: Option<BufWriter<File>>,
    events: EventWriter,
}

const CSV_HEADER: &str = "step,samples,episodes,epochs,loss,grad_norm,lr,update_s,data_s,samples_per_s";

impl MetricsWriter {
    /// Opens (appending, for resumed runs) the metric files in `dir`.
    pub fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let csv = append_csv(&dir.join("metrics.csv"), CSV_HEADER)?;
        Ok(Self { dir: dir.to_path_buf(), csv, eval_csv: None, events: EventWriter::create(dir)? })
    }

    /// Records a held-out loss (`eval/eval_loss` in TensorBoard, as LeRobot's W&B key).
    pub fn write_eval(&mut self, step: usize, eval_loss: f64) -> Result<()> {
        let path = self.dir.join("eval_metrics.csv");
        let csv = match &mut self.eval_csv {
            Some(csv) => csv,
            none => none.insert(append_csv(&path, "step,eval_loss")?),
        };
        writeln!(csv, "{step},{eval_loss}").and_then(|()| csv.flush()).map_err(|e| Error::io(&path, e))?;
        self.events.scalar("eval/eval_loss", eval_loss as f32, step as i64)?;
        self.events.flush()
    }

    /// Records one logging period.
    pub fn write(&mut self, m: &Metrics) -> Result<()> {
        let row = format!(
            "{},{},{:.3},{:.5},{},{},{},{},{},{}",
            m.step, m.samples, m.episodes, m.epochs, m.loss, m.grad_norm, m.lr, m.update_s, m.data_s, m.samples_per_s
        );
        writeln!(self.csv, "{row}").and_then(|()| self.csv.flush()).map_err(|e| Error::io("metrics.csv", e))?;
        for (tag, value) in [
            ("train/loss", m.loss),
            ("train/grad_norm", m.grad_norm),
            ("train/lr", m.lr),
            ("train/update_s", m.update_s),
            ("train/data_s", m.data_s),
            ("train/samples_per_s", m.samples_per_s),
            ("train/epochs", m.epochs),
        ] {
            self.events.scalar(tag, value as f32, m.step as i64)?;
        }
        self.events.flush()
    }
}

/// The CSV file at `path`, opened to append rows (for resumed runs), with `header` written first
/// when the file is new.
fn append_csv(path: &Path, header: &str) -> Result<BufWriter<File>> {
    let fresh = !path.exists();
    let file = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|e| Error::io(path, e))?;
    let mut csv = BufWriter::new(file);
    if fresh {
        writeln!(csv, "{header}").map_err(|e| Error::io(path, e))?;
    }
    Ok(csv)
}

/// A TensorBoard event file (`events.out.tfevents.*`): TFRecord framing of `Event` protocol
/// buffers with scalar summaries.
pub struct EventWriter {
    path: std::path::PathBuf,
    file: BufWriter<File>,
}

const CRC: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

fn masked_crc(bytes: &[u8]) -> u32 {
    let c = CRC.checksum(bytes);
    (c.rotate_right(15)).wrapping_add(0xa282_ead8)
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn length_delimited(field: u8, bytes: &[u8], out: &mut Vec<u8>) {
    out.push((field << 3) | 2);
    varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

impl EventWriter {
    /// Creates an event file in `dir` and writes its version record.
    pub fn create(dir: &Path) -> Result<Self> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let host =
            std::fs::read_to_string("/etc/hostname").map_or_else(|_| "localhost".to_string(), |h| h.trim().to_string());
        let path = dir.join(format!("events.out.tfevents.{now}.{host}"));
        let file = File::create(&path).map_err(|e| Error::io(&path, e))?;
        let mut writer = Self { path, file: BufWriter::new(file) };
        let mut event = Vec::new();
        event.push(0x09);
        event.extend_from_slice(&Self::wall_time().to_le_bytes());
        length_delimited(3, b"brain.Event:2", &mut event);
        writer.record(&event)?;
        Ok(writer)
    }

    fn wall_time() -> f64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
    }

    /// Writes one scalar.
    pub fn scalar(&mut self, tag: &str, value: f32, step: i64) -> Result<()> {
        let mut summary_value = Vec::new();
        length_delimited(1, tag.as_bytes(), &mut summary_value);
        summary_value.push((2 << 3) | 5);
        summary_value.extend_from_slice(&value.to_le_bytes());
        let mut summary = Vec::new();
        length_delimited(1, &summary_value, &mut summary);
        let mut event = Vec::new();
        event.push(0x09);
        event.extend_from_slice(&Self::wall_time().to_le_bytes());
        event.push(2 << 3);
        varint(step as u64, &mut event);
        length_delimited(5, &summary, &mut event);
        self.record(&event)
    }

    fn record(&mut self, data: &[u8]) -> Result<()> {
        let len = (data.len() as u64).to_le_bytes();
        let mut framed = Vec::with_capacity(data.len() + 16);
        framed.extend_from_slice(&len);
        framed.extend_from_slice(&masked_crc(&len).to_le_bytes());
        framed.extend_from_slice(data);
        framed.extend_from_slice(&masked_crc(data).to_le_bytes());
        self.file.write_all(&framed).map_err(|e| Error::io(&self.path, e))
    }

    /// Flushes to disk.
    pub fn flush(&mut self) -> Result<()> {
        self.file.flush().map_err(|e| Error::io(&self.path, e))
    }

    /// The event file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_numbers_read_like_lerobots() {
        assert_eq!(big_number(999.0), "999");
        assert_eq!(big_number(1600.0), "2K");
        assert_eq!(big_number(25_600_000.0), "26M");
    }

    #[test]
    fn event_records_are_framed_with_masked_crcs() {
        // The CRC-32C of "123456789" is 0xE3069283 (the standard check value).
        assert_eq!(CRC.checksum(b"123456789"), 0xE306_9283);
        let dir = tempfile::tempdir().unwrap();
        let mut w = EventWriter::create(dir.path()).unwrap();
        w.scalar("train/loss", 0.5, 7).unwrap();
        w.flush().unwrap();
        let bytes = std::fs::read(w.path()).unwrap();
        // Walk the records: length, its CRC, data, data CRC.
        let mut at = 0;
        let mut records = 0;
        while at < bytes.len() {
            let len = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
            assert_eq!(u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()), masked_crc(&bytes[at..at + 8]));
            let data = &bytes[at + 12..at + 12 + len];
            assert_eq!(u32::from_le_bytes(bytes[at + 12 + len..at + 16 + len].try_into().unwrap()), masked_crc(data));
            at += 16 + len;
            records += 1;
        }
        assert_eq!(records, 2);
        assert!(bytes.windows(10).any(|w| w == b"train/loss"));
    }
}
