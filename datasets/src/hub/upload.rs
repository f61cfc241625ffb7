//! Files committed to a model repository on the Hugging Face Hub, through the Hub's HTTP API as
//! `huggingface_hub`'s `upload_folder` calls it without Xet: the repository made if missing
//! (`POST /api/repos/create`), each file's upload mode asked (`POST
//! /api/models/OWNER/NAME/preupload/main`), large files sent through Git LFS's batch API (a
//! single `PUT` each), then one commit of them all (`POST /api/models/OWNER/NAME/commit/main`,
//! newline-delimited JSON: small files inline, large ones by their SHA-256).

use std::io::Read;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::{Value, json};
use sha2::Sha256;

use super::download::{digest_file, hex};
use super::{HubEnv, RepoId};
use crate::{Error, Result};

/// A file to commit: where it goes in the repository, and where it is on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadFile {
    /// Its path in the repository (`/`-separated).
    pub path_in_repo: String,
    /// The file on disk.
    pub local: PathBuf,
}

/// Every file under `folder`, at the same relative paths in the repository, in path order.
pub fn files_of_folder(folder: &Path) -> Result<Vec<UploadFile>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<UploadFile>) -> Result<()> {
        let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
        for entry in entries {
            let path = entry.map_err(|e| Error::io(dir, e))?.path();
            if path.is_dir() {
                walk(root, &path, out)?;
            } else {
                let relative = path.strip_prefix(root).expect("under the root");
                let parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
                out.push(UploadFile { path_in_repo: parts.join("/"), local: path });
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(folder, folder, &mut files)?;
    files.sort_by(|a, b| a.path_in_repo.cmp(&b.path_in_repo));
    Ok(files)
}

/// Commits `files` to the model repository `repo_id` (made if missing, private when `private`)
/// on its `main` branch with `message`, with the token of `env`; returns the commit's address.
pub fn upload_to_model_repo(
    env: &HubEnv,
    repo_id: &RepoId,
    files: &[UploadFile],
    message: &str,
    private: Option<bool>,
) -> Result<String> {
    let fail = |message: String| Error::HubUpload { repo_id: repo_id.to_string(), message };
    let token = env.token.as_deref().ok_or_else(|| {
        fail("uploading needs a token that may write to it: set HF_TOKEN (or log in with `hf auth login`)".into())
    })?;
    if env.offline {
        return Err(fail("HF_HUB_OFFLINE forbids the Hub".into()));
    }
    let hub = Hub { env, token, repo_id };
    hub.create_repo(private)?;
    let sizes: Vec<u64> = files
        .iter()
        .map(|f| std::fs::metadata(&f.local).map(|m| m.len()).map_err(|e| Error::io(&f.local, e)))
        .collect::<Result<_>>()?;
    let modes = hub.upload_modes(files, &sizes)?;
    let mut lines = vec![json!({"key": "header", "value": {"summary": message, "description": ""}})];
    for ((file, size), lfs) in files.iter().zip(&sizes).zip(modes) {
        if lfs {
            let oid = sha256_of(&file.local)?;
            hub.upload_lfs(file, &oid, *size)?;
            lines.push(json!({"key": "lfsFile", "value": {"path": file.path_in_repo, "algo": "sha256", "oid": oid, "size": size}}));
        } else {
            let bytes = std::fs::read(&file.local).map_err(|e| Error::io(&file.local, e))?;
            let content = base64::engine::general_purpose::STANDARD.encode(bytes);
            lines.push(
                json!({"key": "file", "value": {"content": content, "path": file.path_in_repo, "encoding": "base64"}}),
            );
        }
    }
    hub.commit(&lines)
}

/// The requests of one upload.
struct Hub<'a> {
    env: &'a HubEnv,
    token: &'a str,
    repo_id: &'a RepoId,
}

impl Hub<'_> {
    fn agent() -> ureq::Agent {
        ureq::AgentBuilder::new().try_proxy_from_env(true).build()
    }

    fn post(&self, url: &str) -> ureq::Request {
        Self::agent().post(url).set("Authorization", &format!("Bearer {}", self.token))
    }

    /// The error of request `doing`, saying what the Hub answered.
    fn failed(&self, doing: &str, error: ureq::Error) -> Error {
        let message = match error {
            ureq::Error::Status(401 | 403, _) => {
                format!("{doing}: the Hub refused the token in HF_TOKEN (or the token file): it may not write here")
            }
            ureq::Error::Status(status, response) => {
                let body = response.into_string().unwrap_or_default();
                format!("{doing}: the Hub answered {status}: {}", body.chars().take(300).collect::<String>())
            }
            ureq::Error::Transport(transport) => format!("{doing}: {transport}"),
        };
        self.error(message)
    }

    /// An error of this upload, saying `message`.
    fn error(&self, message: String) -> Error {
        Error::HubUpload { repo_id: self.repo_id.to_string(), message }
    }

    /// The JSON answer of `response`, or an error naming `doing`.
    fn json(&self, doing: &str, response: ureq::Response) -> Result<Value> {
        response.into_json().map_err(|e| self.error(format!("{doing}: the Hub's answer is not JSON: {e}")))
    }

    /// Makes the repository; one that exists already (409) is fine.
    fn create_repo(&self, private: Option<bool>) -> Result<()> {
        let (owner, name) = self.repo_id.as_str().split_once('/').expect("OWNER/NAME");
        let mut body = json!({"name": name, "organization": owner});
        if let Some(private) = private {
            body["visibility"] = json!(if private { "private" } else { "public" });
        }
        match self.post(&format!("{}/api/repos/create", self.env.endpoint)).send_json(body) {
            Ok(_) | Err(ureq::Error::Status(409, _)) => Ok(()),
            Err(e) => Err(self.failed("creating the repository", e)),
        }
    }

    /// Whether each file goes through Git LFS (else inline in the commit), as the Hub decides
    /// from its size and first 512 bytes.
    fn upload_modes(&self, files: &[UploadFile], sizes: &[u64]) -> Result<Vec<bool>> {
        let mut entries = Vec::new();
        for (file, size) in files.iter().zip(sizes) {
            let mut sample = vec![0; 512];
            let mut reader = std::fs::File::open(&file.local).map_err(|e| Error::io(&file.local, e))?;
            let n = reader.read(&mut sample).map_err(|e| Error::io(&file.local, e))?;
            sample.truncate(n);
            let sample = base64::engine::general_purpose::STANDARD.encode(sample);
            entries.push(json!({"path": file.path_in_repo, "sample": sample, "size": size}));
        }
        let doing = "asking how to upload the files";
        let url = format!("{}/api/models/{}/preupload/main", self.env.endpoint, self.repo_id);
        let answer =
            self.json(doing, self.post(&url).send_json(json!({"files": entries})).map_err(|e| self.failed(doing, e))?)?;
        let listed = answer["files"].as_array().cloned().unwrap_or_default();
        files
            .iter()
            .zip(sizes)
            .map(|(file, size)| {
                let mode = listed.iter().find(|f| f["path"] == file.path_in_repo.as_str()).map(|f| &f["uploadMode"]);
                match mode.and_then(Value::as_str) {
                    // An empty file is never an LFS object.
                    Some("lfs") => Ok(*size > 0),
                    Some("regular") => Ok(false),
                    other => {
                        Err(self
                            .error(format!("{doing}: no upload mode for {} (answered {other:?})", file.path_in_repo)))
                    }
                }
            })
            .collect()
    }

    /// Sends `file` (SHA-256 `oid`, `size` bytes) through Git LFS's batch API, unless the Hub
    /// has it already.
    fn upload_lfs(&self, file: &UploadFile, oid: &str, size: u64) -> Result<()> {
        let doing = format!("uploading {}", file.path_in_repo);
        let url = format!("{}/{}.git/info/lfs/objects/batch", self.env.endpoint, self.repo_id);
        let request = json!({
            "operation": "upload", "transfers": ["basic"], "hash_algo": "sha256",
            "objects": [{"oid": oid, "size": size}], "ref": {"name": "main"},
        });
        let response = self
            .post(&url)
            .set("Accept", "application/vnd.git-lfs+json")
            .set("Content-Type", "application/vnd.git-lfs+json")
            .send_string(&request.to_string())
            .map_err(|e| self.failed(&doing, e))?;
        let answer = self.json(&doing, response)?;
        let object = &answer["objects"][0];
        if let Some(error) = object.get("error") {
            return Err(self.error(format!("{doing}: {error}")));
        }
        let Some(upload) = object["actions"].get("upload") else {
            return Ok(()); // The Hub has it already.
        };
        let href = upload["href"]
            .as_str()
            .ok_or_else(|| self.error(format!("{doing}: the LFS answer has no upload address")))?;
        let mut put = Self::agent().put(href).set("Content-Length", &size.to_string());
        for (name, value) in upload["header"].as_object().into_iter().flatten() {
            put = put.set(name, value.as_str().unwrap_or_default());
        }
        let body = std::fs::File::open(&file.local).map_err(|e| Error::io(&file.local, e))?;
        put.send(body).map_err(|e| self.failed(&doing, e))?;
        if let Some(verify) = object["actions"].get("verify").and_then(|v| v["href"].as_str()) {
            self.post(verify)
                .set("Content-Type", "application/vnd.git-lfs+json")
                .send_string(&json!({"oid": oid, "size": size}).to_string())
                .map_err(|e| self.failed(&format!("{doing} (verifying)"), e))?;
        }
        Ok(())
    }

    /// Commits `lines` (the header, then one line per file); returns the commit's address.
    fn commit(&self, lines: &[Value]) -> Result<String> {
        let doing = "committing the files";
        let body: String = lines.iter().map(|line| format!("{line}\n")).collect();
        let url = format!("{}/api/models/{}/commit/main", self.env.endpoint, self.repo_id);
        let response = self
            .post(&url)
            .set("Content-Type", "application/x-ndjson")
            .send_string(&body)
            .map_err(|e| self.failed(doing, e))?;
        let answer = self.json(doing, response)?;
        Ok(answer["commitUrl"].as_str().unwrap_or_default().to_string())
    }
}

/// The SHA-256 of the file at `path`, in hex (as the Hub names LFS objects).
fn sha256_of(path: &Path) -> Result<String> {
    Ok(hex(&digest_file::<Sha256>(path, None).map_err(|e| Error::io(path, e))?))
}
