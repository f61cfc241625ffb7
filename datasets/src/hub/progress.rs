//! Resolving a dataset from a tool: a terminal progress bar for downloads, and the line that
//! says where the dataset was found (the `cli` feature).

use indicatif::{ProgressBar, ProgressStyle};

use super::{DatasetRequest, DownloadEvent, HubEnv, RepoId, Resolved, resolve, resolve_model};
use crate::Result;

/// [`resolve`] as the tools run it: with this process's [`HubEnv`], a [`DownloadBar`] while it
/// downloads, and a line on stderr saying where the dataset was found.
pub fn resolve_on_terminal(request: &DatasetRequest) -> Result<Resolved> {
    let mut bar = DownloadBar::default();
    let resolved = resolve(request, &HubEnv::from_env(), &mut |event| bar.observe(event));
    bar.finish();
    let resolved = resolved?;
    eprintln!("dataset {}: {resolved}", request.repo_id);
    Ok(resolved)
}

/// [`resolve_model`] as the tools run it: this process's [`HubEnv`], a [`DownloadBar`] while it
/// downloads, and a line on stderr saying where the policy was found.
pub fn resolve_model_on_terminal(repo_id: &RepoId, revision: Option<&str>) -> Result<Resolved> {
    let mut bar = DownloadBar::default();
    let resolved = resolve_model(repo_id, revision, &HubEnv::from_env(), &mut |event| bar.observe(event));
    bar.finish();
    let resolved = resolved?;
    eprintln!("policy {repo_id}: {resolved}");
    Ok(resolved)
}

/// Shows a download's bytes on one bar; feed it every [`DownloadEvent`] with [`Self::observe`].
#[derive(Debug)]
pub struct DownloadBar {
    bar: ProgressBar,
    /// The file in flight and its size.
    current: Option<(String, u64)>,
    /// Bytes of the files before it.
    done: u64,
}

impl Default for DownloadBar {
    fn default() -> Self {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes}  {bytes_per_sec}  eta {eta}  {msg}")
                .expect("a valid template"),
        );
        Self { bar, current: None, done: 0 }
    }
}

impl DownloadBar {
    /// Moves the bar: a retried file counts from where its transfer resumed, not twice.
    pub fn observe(&mut self, event: DownloadEvent<'_>) {
        match event {
            DownloadEvent::Plan { files, bytes } => {
                // A download of some episodes plans twice: the metadata, then their files.
                self.bar.inc_length(bytes);
                self.bar.set_message(format!("{files} files"));
            }
            DownloadEvent::File { name, size, resumed_at } => {
                if self.current.as_ref().is_some_and(|(current, _)| current != name) {
                    self.done += self.current.as_ref().map_or(0, |(_, size)| *size);
                }
                self.current = Some((name.to_string(), size));
                self.bar.set_position(self.done + resumed_at);
                self.bar.set_message(name.to_string());
            }
            DownloadEvent::Bytes(bytes) => self.bar.inc(bytes),
        }
    }

    /// Clears the bar.
    pub fn finish(self) {
        self.bar.finish_and_clear();
    }
}
