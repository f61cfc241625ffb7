//! Sharing a trained policy on the Hub as LeRobot does (`--policy.push_to_hub`, `trainer export
//! --push_to_hub`), against a server of our own on 127.0.0.1 that answers the Hub's upload API
//! as huggingface_hub's `upload_folder` uses it without Xet (repository creation, preupload, Git
//! LFS batch and `PUT`, NDJSON commit): every file arrives whole with the user's token; a refused
//! token, a cut connection and a missing token are errors that say which.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use base64::Engine;
use datasets::hub::{HubEnv, UploadFile, upload_to_model_repo};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use common::scratch;

const DATASET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/lerobot-0.6.1/pusht_images");

/// One request the server received.
#[derive(Debug, Clone)]
struct Request {
    method: String,
    path: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

/// How the server misbehaves.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    None,
    /// Repository creation answered 403.
    RefuseToken,
    /// An LFS upload cut after 100 bytes.
    CutUpload,
}

/// A Hub stand-in; returns its address and what it received.
fn serve(fault: Fault) -> (String, Arc<Mutex<Vec<Request>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let received = Arc::new(Mutex::new(Vec::new()));
    let (log, base) = (received.clone(), url.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let _ = answer(stream, fault, &base, &log);
        }
    });
    (url, received)
}

fn answer(mut stream: TcpStream, fault: Fault, base: &str, log: &Mutex<Vec<Request>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
    let mut headers = HashMap::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? <= 2 {
            break;
        }
        if let Some((name, value)) = header.trim_end().split_once(':') {
            headers.insert(name.to_ascii_lowercase(), value.trim().to_string());
        }
    }
    let length: usize = headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
    if fault == Fault::CutUpload && method == "PUT" {
        let mut some = vec![0; 100.min(length)];
        reader.read_exact(&mut some)?;
        return Ok(()); // The connection drops mid-upload.
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let request = Request { method: method.clone(), path: path.clone(), headers, body };
    let reply = |status: &str, body: Value| (status.to_string(), body.to_string());
    let (status, text) = match (method.as_str(), path.as_str()) {
        ("POST", "/api/repos/create") if fault == Fault::RefuseToken => reply("403 Forbidden", json!({"error": "no"})),
        ("POST", "/api/repos/create") => reply("200 OK", json!({"url": format!("{base}/me/tiny-policy")})),
        ("POST", p) if p.ends_with("/preupload/main") => {
            let asked: Value = serde_json::from_slice(&request.body).unwrap();
            let files: Vec<Value> = asked["files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    let lfs = f["path"].as_str().unwrap().ends_with(".safetensors");
                    json!({"path": f["path"], "uploadMode": if lfs { "lfs" } else { "regular" }, "shouldIgnore": false})
                })
                .collect();
            reply("200 OK", json!({"files": files}))
        }
        ("POST", p) if p.ends_with(".git/info/lfs/objects/batch") => {
            let asked: Value = serde_json::from_slice(&request.body).unwrap();
            let objects: Vec<Value> = asked["objects"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| {
                    let href = format!("{base}/lfs-storage/{}", o["oid"].as_str().unwrap());
                    json!({"oid": o["oid"], "size": o["size"], "actions": {"upload": {"href": href, "header": {"x-amz-test": "signed"}}}})
                })
                .collect();
            reply("200 OK", json!({"transfer": "basic", "objects": objects}))
        }
        ("PUT", p) if p.starts_with("/lfs-storage/") => reply("200 OK", json!({})),
        ("POST", p) if p.ends_with("/commit/main") => {
            reply("200 OK", json!({"commitUrl": format!("{base}/me/tiny-policy/commit/c0ffee"), "commitOid": "c0ffee"}))
        }
        _ => reply("404 Not Found", json!({"error": "unknown"})),
    };
    log.lock().unwrap().push(request);
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    )
}

fn env(endpoint: &str, token: Option<&str>) -> HubEnv {
    let mut env = HubEnv::from_vars(|_| None);
    env.endpoint = endpoint.to_string();
    env.token = token.map(str::to_string);
    env
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_trained_policy_is_pushed_whole_with_the_users_token() {
    let (endpoint, received) = serve(Fault::None);
    let out = scratch("push-to-hub");
    let output = common::trainer_command()
        .args(["--dataset.root", DATASET, "--dataset.frame_cache", "off", "--policy.down_dims", "16,32,64"])
        .args(["--policy.crop_shape", "32x32", "--batch_size", "2", "--steps", "1", "--num_workers", "1"])
        .args(["--policy.push_to_hub", "true", "--policy.repo_id", "me/tiny-policy", "--output_dir"])
        .arg(&*out)
        .env("HF_ENDPOINT", &endpoint)
        .env("HF_TOKEN", "hf_test_token")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        stdout.contains(&format!("pushed the policy to me/tiny-policy ({endpoint}/me/tiny-policy/commit/c0ffee)")),
        "{stdout}"
    );

    let requests = received.lock().unwrap().clone();
    let bearer =
        requests.iter().filter(|r| r.method == "POST").all(|r| r.headers["authorization"] == "Bearer hf_test_token");
    assert!(bearer, "a request without the token: {requests:#?}");
    let create = requests.iter().find(|r| r.path == "/api/repos/create").expect("the repository made");
    assert_eq!(
        serde_json::from_slice::<Value>(&create.body).unwrap(),
        json!({"name": "tiny-policy", "organization": "me"})
    );

    // The commit names every file of the checkpoint's pretrained_model/ (and the model card);
    // the small ones inline, the weights through LFS, each equal to the file on disk.
    let policy = trainer::checkpoint::resolve(&out).unwrap().join("pretrained_model");
    let commit = requests.iter().find(|r| r.path == "/api/models/me/tiny-policy/commit/main").expect("a commit");
    assert_eq!(commit.headers["content-type"], "application/x-ndjson");
    let lines: Vec<Value> =
        String::from_utf8(commit.body.clone()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["key"], "header");
    let mut committed = Vec::new();
    for line in &lines[1..] {
        let path = line["value"]["path"].as_str().unwrap().to_string();
        let local = std::fs::read(policy.join(&path)).unwrap();
        match line["key"].as_str().unwrap() {
            "file" => {
                let content = base64::engine::general_purpose::STANDARD
                    .decode(line["value"]["content"].as_str().unwrap())
                    .unwrap();
                assert!(content == local, "{path} differs");
            }
            "lfsFile" => {
                assert_eq!(line["value"]["oid"].as_str().unwrap(), sha256_hex(&local), "{path}");
                let put =
                    requests.iter().find(|r| r.path == format!("/lfs-storage/{}", sha256_hex(&local))).expect(&path);
                assert_eq!(put.headers["x-amz-test"], "signed", "the LFS action's headers go with the upload");
                assert!(put.body == local, "{path}'s upload differs");
            }
            other => panic!("{other}"),
        }
        committed.push(path);
    }
    committed.sort();
    let mut expected: Vec<String> =
        std::fs::read_dir(&policy).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    expected.sort();
    assert_eq!(committed, expected);
    assert!(committed.contains(&"README.md".to_string()) && committed.contains(&"model.safetensors".to_string()));
    let card = std::fs::read_to_string(policy.join("README.md")).unwrap();
    assert!(card.contains("library_name: lerobot") && card.contains("pipeline_tag: robotics"), "{card}");
}

#[test]
fn a_refused_token_a_cut_upload_and_no_token_are_errors_that_say_which() {
    let work = scratch("push-refusals");
    std::fs::create_dir_all(&*work).unwrap();
    std::fs::write(work.join("config.json"), b"{}").unwrap();
    std::fs::write(work.join("model.safetensors"), vec![7u8; 100_000]).unwrap();
    let files = datasets::hub::files_of_folder(&work).unwrap();
    assert_eq!(files.iter().map(|f| f.path_in_repo.as_str()).collect::<Vec<_>>(), ["config.json", "model.safetensors"]);
    let repo = "me/tiny-policy".parse().unwrap();
    let push = |endpoint: &str, token: Option<&str>, files: &[UploadFile]| {
        upload_to_model_repo(&env(endpoint, token), &repo, files, "test", None).unwrap_err().to_string()
    };

    let (refusing, _) = serve(Fault::RefuseToken);
    let err = push(&refusing, Some("hf_bad"), &files);
    assert!(err.contains("me/tiny-policy") && err.contains("refused the token"), "{err}");

    let (cutting, received) = serve(Fault::CutUpload);
    let err = push(&cutting, Some("hf_test_token"), &files);
    assert!(err.contains("uploading model.safetensors"), "{err}");
    assert!(received.lock().unwrap().iter().all(|r| !r.path.ends_with("/commit/main")), "committed after a cut upload");

    let (fine, received) = serve(Fault::None);
    let err = push(&fine, None, &files);
    assert!(err.contains("HF_TOKEN"), "{err}");
    assert!(received.lock().unwrap().is_empty(), "asked the Hub without a token");
}

#[test]
fn pushing_without_a_repository_is_refused_before_training() {
    let out = scratch("push-without-repo");
    let output = common::trainer_command()
        .args(["--dataset.root", DATASET, "--policy.push_to_hub", "true", "--steps", "1", "--output_dir"])
        .arg(&*out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("needs --policy.repo_id"), "{stderr}");
    assert!(!out.join("checkpoints").exists(), "trained before refusing");
}
