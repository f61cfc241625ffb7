//! torchvision's weights by the name LeRobot gives them (`ResNet18_Weights.IMAGENET1K_V1`, the
//! lerobot-0.6 preset's backbone): found in torch's hub cache (`$TORCH_HOME/hub/checkpoints`),
//! else downloaded into it (here from a server of our own on 127.0.0.1 standing in for
//! download.pytorch.org) and checked against the hash prefix in the file's name; a file is whole
//! or absent, and without the file or a network the error says where it goes.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;

use sha2::{Digest, Sha256};
use trainer::lerobot::{TorchHub, backbone_weights_file, download_checked};

use common::lerobot_model::{formula_state_dict, read_json, write_safetensors};

/// Serves `body` at `/models/NAME` for each `(NAME, body)`, claiming `claimed` bytes when given
/// (more than the body: the connection is cut short); anything else is a 404. Returns the
/// models' address.
fn serve(files: Vec<(String, Vec<u8>, Option<usize>)>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/models", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            reader.read_line(&mut request).unwrap();
            let mut header = String::new();
            while reader.read_line(&mut header).unwrap_or(0) > 2 {
                header.clear();
            }
            let path = request.split(' ').nth(1).unwrap_or("");
            let file = files.iter().find(|(name, _, _)| path == format!("/models/{name}"));
            let _ = match file {
                Some((_, body, claimed)) => {
                    let length = claimed.unwrap_or(body.len());
                    write!(stream, "HTTP/1.1 200 OK\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n")
                        .and_then(|()| stream.write_all(body))
                }
                None => stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
            };
        }
    });
    url
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|byte| format!("{byte:02x}")).collect()
}

fn files_in(folder: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .map(|entries| entries.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_download_whose_hash_matches_its_name_lands_whole_and_dead_leftovers_go() {
    let body = b"weights as torchvision would serve them".repeat(5_000);
    let name = format!("tiny-{}.pth", &sha256_hex(&body)[..8]);
    let url = serve(vec![(name.clone(), body.clone(), None)]);
    let home = tempfile::tempdir().unwrap();
    let folder = home.path().join("hub/checkpoints");
    std::fs::create_dir_all(&folder).unwrap();
    // What a killed download left (no process has that id), and one whose process is alive (1).
    std::fs::write(folder.join(format!(".{name}.partial-4000000000")), b"half").unwrap();
    std::fs::write(folder.join(format!(".{name}.partial-1")), b"in progress").unwrap();

    download_checked(&format!("{url}/{name}"), &folder.join(&name)).unwrap();
    assert_eq!(std::fs::read(folder.join(&name)).unwrap(), body);
    assert_eq!(files_in(&folder), [format!(".{name}.partial-1"), name]);
}

#[test]
fn a_download_that_is_not_what_its_name_says_or_is_cut_leaves_nothing() {
    let body = b"not the weights the name promises".to_vec();
    let url = serve(vec![
        ("wrong-00000000.pth".into(), body.clone(), None),
        ("cut-00000000.pth".into(), body.clone(), Some(body.len() * 2)),
    ]);
    let home = tempfile::tempdir().unwrap();

    let err =
        download_checked(&format!("{url}/wrong-00000000.pth"), &home.path().join("wrong-00000000.pth")).unwrap_err();
    assert!(err.contains(&sha256_hex(&body)) && err.contains("00000000") && err.contains("refused"), "{err}");
    let err = download_checked(&format!("{url}/cut-00000000.pth"), &home.path().join("cut-00000000.pth")).unwrap_err();
    assert!(err.contains("cut-00000000.pth"), "{err}");
    let err = download_checked(&format!("{url}/absent.pth"), &home.path().join("absent.pth")).unwrap_err();
    assert!(err.contains("404"), "{err}");
    assert!(files_in(home.path()).is_empty(), "left behind: {:?}", files_in(home.path()));
}

#[test]
fn a_weights_name_is_torchvisions_file_in_torchs_hub() {
    let home = tempfile::tempdir().unwrap();
    let hub = TorchHub { checkpoints: home.path().join("hub/checkpoints"), models_url: serve(Vec::new()) };
    let mut downloads = Vec::new();
    let mut on_download = |url: &str, _: &Path| downloads.push(url.to_string());

    // Missing and not on the server: the error names the file, where it goes and where it is from.
    let err = backbone_weights_file("ResNet18_Weights.IMAGENET1K_V1", &hub, &mut on_download).unwrap_err().to_string();
    let expected = hub.checkpoints.join("resnet18-f37072fd.pth");
    for part in ["ResNet18_Weights.IMAGENET1K_V1", &expected.display().to_string(), "TORCH_HOME", &hub.models_url] {
        assert!(err.contains(part), "{part:?} missing from: {err}");
    }
    assert_eq!(downloads, [format!("{}/resnet18-f37072fd.pth", hub.models_url)]);

    // Present: found there, with no request.
    std::fs::create_dir_all(&hub.checkpoints).unwrap();
    std::fs::write(&expected, b"cached").unwrap();
    downloads.clear();
    let mut on_download = |url: &str, _: &Path| downloads.push(url.to_string());
    assert_eq!(backbone_weights_file("ResNet18_Weights.DEFAULT", &hub, &mut on_download).unwrap(), expected);
    assert_eq!(
        backbone_weights_file("/some/resnet18.pth", &hub, &mut on_download).unwrap(),
        Path::new("/some/resnet18.pth")
    );
    assert!(downloads.is_empty());
}

#[test]
fn the_lerobot_preset_trains_from_imagenet_weights_in_torchs_cache() {
    let dataset = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/lerobot-0.6.1/pusht_images");
    let torch_home = tempfile::tempdir().unwrap();
    let output = tempfile::tempdir().unwrap();
    let train = || {
        let output = common::trainer_command()
            .args(["--dataset.root", dataset, "--policy.preset", "lerobot-0.6", "--policy.down_dims", "64,128,256"])
            .args(["--policy.horizon", "16", "--policy.n_action_steps", "8", "--batch_size", "2", "--steps", "1"])
            .args(["--num_workers", "1", "--output_dir"])
            .arg(output.path().join("run"))
            .env("TORCH_HOME", torch_home.path())
            .env("LEROBOT_RS_TORCHVISION_MODELS_URL", serve(Vec::new()))
            .output()
            .unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let weights = torch_home.path().join("hub/checkpoints/resnet18-f37072fd.pth");

    // Not there, and the network has no copy: refused before training, saying where it goes.
    let (ok, _, stderr) = train();
    assert!(!ok && stderr.contains(&weights.display().to_string()), "{stderr}");

    // Put there (torchvision's names and shapes; a safetensors file under torch's name): used.
    std::fs::create_dir_all(weights.parent().unwrap()).unwrap();
    write_safetensors(&formula_state_dict(&read_json("resnet18.json")["weights"]), &weights);
    let (ok, stdout, stderr) = train();
    assert!(ok, "{stderr}");
    let line = format!("pretrained backbone: ResNet18_Weights.IMAGENET1K_V1 ({})", weights.display());
    assert!(stdout.contains(&line), "no {line:?} in:\n{stdout}");
}
