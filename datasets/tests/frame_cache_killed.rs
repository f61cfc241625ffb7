//! A process killed (`kill -9`) at any moment of building a frame cache leaves nothing that
//! outlives the next run: the next run's plan removes the temporary files and half-built folders
//! of writers that ended, and what then remains in the folder of automatic caches is complete
//! caches only. The frame cache lives in /dev/shm, which is memory: what a killed run left would
//! otherwise hold it until the machine reboots. Also: the least recently used idle caches make
//! room for a new one, never one in use, and `datasets cache --list/--clear` show and free them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use datasets::Dataset;
use datasets::auto_cache::{AutoCache, FRAME_CACHE_VAR, plan};
use datasets::frame_cache::store::{EntryState, Reason, entries};
use datasets::frame_cache::{CacheFormat, FrameCache, RECORD, decoded_bytes, write_frame_cache};
use datasets::synth::{CameraSpec, CameraStorage, SynthConfig, write_dataset};

/// Two PNG cameras, so that a build has a moment between cameras, and enough frames that each
/// camera takes a while to decode.
fn two_camera_dataset(root: &Path, seed: u64) -> Dataset {
    let camera = |key: &str| CameraSpec { key: key.into(), height: 120, width: 160 };
    let config = SynthConfig {
        episodes: 8,
        min_length: 60,
        max_length: 60,
        cameras: vec![camera("observation.images.left"), camera("observation.images.right")],
        storage: CameraStorage::Images,
        seed,
        ..Default::default()
    };
    write_dataset(root, &config).unwrap();
    Dataset::open(root).unwrap()
}

/// `datasets cache` building `dataset`'s cache into `out`.
fn start_build(dataset: &Path, out: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_datasets"))
        .args(["cache", "--root", dataset.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The names of the files in `dir` (none if it does not exist).
fn names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|l| l.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

/// Waits until `moment` holds of the files in `dir`, or the build ends; whether it held.
fn wait_for(child: &mut Child, dir: &Path, moment: impl Fn(&[String]) -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if moment(&names(dir)) {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    panic!("the build neither reached the moment nor ended in 60 s: {:?}", names(dir));
}

/// Every folder under `root` holds a complete cache and no temporary file.
fn only_complete_caches(root: &Path) -> Result<(), String> {
    for dir in std::fs::read_dir(root).unwrap().flatten().map(|e| e.path()) {
        let files = names(&dir);
        if !files.iter().any(|f| f == RECORD) {
            return Err(format!("{} is not complete: {files:?}", dir.display()));
        }
        if files.iter().any(|f| f.contains(".tmp.")) {
            return Err(format!("{} holds a temporary file: {files:?}", dir.display()));
        }
    }
    Ok(())
}

#[test]
fn a_build_killed_at_any_moment_leaves_only_complete_caches_after_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let dataset_root = dir.path().join("dataset");
    let dataset = two_camera_dataset(&dataset_root, 1);
    type Moment = fn(&[String]) -> bool;
    let moments: [(&str, Moment); 4] = [
        ("as it starts", |_| true),
        ("while the first camera is written", |f| f.iter().any(|n| n.contains(".tmp."))),
        ("between the cameras", |f| f.iter().any(|n| n.ends_with(".frames"))),
        ("while the second camera is written", |f| {
            f.iter().any(|n| n.ends_with(".frames")) && f.iter().any(|n| n.contains(".tmp."))
        }),
    ];
    let mut reached = 0;
    for (moment, reached_it) in moments {
        let caches = dir.path().join(format!("caches-{reached}"));
        let AutoCache::Build { dir: cache_dir, .. } =
            plan(&dataset, &[CacheFormat::default()], &caches, None, &[]).unwrap().cache
        else {
            panic!("no cache yet: the plan is to build one");
        };
        // The killed run's cache, and another one's half-built folder of a dataset since gone.
        let mut child = start_build(&dataset_root, &cache_dir);
        let mut other = start_build(&dataset_root, &caches.join("0123456789abcdef"));
        let hit = wait_for(&mut child, &cache_dir, reached_it);
        child.kill().unwrap();
        // A build that ended on its own just before the kill was not killed at that moment.
        let hit = hit && !child.wait().unwrap().success();
        let _ = wait_for(&mut other, &caches.join("0123456789abcdef"), reached_it);
        other.kill().unwrap();
        other.wait().unwrap();
        if !hit {
            eprintln!("the build ended before {moment}: not a kill at that moment");
            continue;
        }
        reached += 1;

        // The next run: it removes what the killed ones left, then builds its cache.
        let next = plan(&dataset, &[CacheFormat::default()], &caches, None, &[]).unwrap();
        let AutoCache::Build { dir: again, .. } = next.cache else {
            panic!("killed {moment}: the next run must build the cache again, not {}", next.cache);
        };
        write_frame_cache(&dataset, &again, &Default::default(), &|_| {}).unwrap();
        FrameCache::open(&again, &dataset).unwrap();
        if let Err(left) = only_complete_caches(&caches) {
            panic!("killed {moment}, the next run left {left}");
        }
    }
    assert!(reached >= 3, "only {reached} of the 4 moments were reached before the builds ended");
}

#[test]
fn the_least_recently_used_idle_caches_make_room_and_one_in_use_stays() {
    let dir = tempfile::tempdir().unwrap();
    let caches = dir.path().join("caches");
    let sets: Vec<Dataset> = (0..3).map(|i| two_camera_dataset(&dir.path().join(format!("d{i}")), i)).collect();
    let bytes = decoded_bytes(&sets[0], &CacheFormat::default());
    let mut built: Vec<PathBuf> = Vec::new();
    for dataset in &sets[..2] {
        let AutoCache::Build { dir, .. } = plan(dataset, &[CacheFormat::default()], &caches, None, &[]).unwrap().cache
        else {
            panic!()
        };
        write_frame_cache(dataset, &dir, &Default::default(), &|_| {}).unwrap();
        built.push(dir);
    }
    // Both caches and a third fit only if one goes: a budget of about two and a half.
    let budget = bytes * 5 / 2;
    // The older one is in use, the newer one idle.
    let reading = FrameCache::open(&built[0], &sets[0]).unwrap();
    drop(FrameCache::open(&built[1], &sets[1]).unwrap());
    let plan_c = plan(&sets[2], &[CacheFormat::default()], &caches, Some(budget), &[]).unwrap();
    assert!(matches!(plan_c.cache, AutoCache::Build { .. }), "{}", plan_c.cache);
    let removed: Vec<&PathBuf> = plan_c.removed.iter().map(|r| &r.path).collect();
    assert_eq!(removed, [&built[1]], "the idle cache goes, not the older one in use");
    assert_eq!(plan_c.removed[0].reason, Reason::LeastRecentlyUsed);
    assert!(plan_c.removed[0].to_string().contains("least recently used"), "{}", plan_c.removed[0]);
    assert!(built[0].exists());
    drop(reading);

    // With nothing idle to remove and no room, the run goes without a cache, removing nothing.
    let reading = FrameCache::open(&built[0], &sets[0]).unwrap();
    let plan_b = plan(&sets[1], &[CacheFormat::default()], &caches, Some(bytes * 3 / 2), &[]).unwrap();
    let AutoCache::TooBig { fitting_budget, .. } = plan_b.cache else {
        panic!("{}", plan_b.cache);
    };
    // The budget it names fits it beside the cache in use.
    let plan_fitting = plan(&sets[1], &[CacheFormat::default()], &caches, Some(fitting_budget), &[]).unwrap();
    assert!(matches!(plan_fitting.cache, AutoCache::Build { .. }), "{}", plan_fitting.cache);
    assert!(plan_b.removed.is_empty());
    let states: Vec<EntryState> = entries(&caches).unwrap().iter().map(|e| e.state).collect();
    assert_eq!(states, [EntryState::InUse]);
    drop(reading);
}

#[test]
fn datasets_cache_lists_and_clears_the_automatic_caches() {
    let dir = tempfile::tempdir().unwrap();
    let caches = dir.path().join("caches");
    let dataset = two_camera_dataset(&dir.path().join("d"), 7);
    let AutoCache::Build { dir: built, .. } =
        plan(&dataset, &[CacheFormat::default()], &caches, None, &[]).unwrap().cache
    else {
        panic!()
    };
    write_frame_cache(&dataset, &built, &Default::default(), &|_| {}).unwrap();
    let tool = |flag: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_datasets"))
            .args(["cache", flag])
            .env(FRAME_CACHE_VAR, &caches)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let listed = tool("--list");
    let name = built.file_name().unwrap().to_str().unwrap();
    assert!(
        listed.contains(name) && listed.contains("idle") && listed.contains(dataset.root().to_str().unwrap()),
        "{listed}"
    );
    let cleared = tool("--clear");
    assert!(cleared.contains(name), "{cleared}");
    assert!(!built.exists(), "--clear left {}", built.display());
    assert!(tool("--list").contains("no automatic frame caches"));
}

/// A cache folder on a filesystem with less room than the cache (a /dev/shm another process has
/// filled): the build fails at once with an error naming the file and the space it needed, never
/// a signal, and leaves nothing in the folder. The filesystem is a 1 MB tmpfs of the child's own,
/// mounted in a user and mount namespace (`unshare`), so the machine's memory is never filled.
#[test]
fn a_cache_larger_than_the_room_left_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = two_camera_dataset(&dir.path().join("d"), 3);
    let mount = dir.path().join("small");
    std::fs::create_dir(&mount).unwrap();
    let script = r#"mount -t tmpfs -o size=1M none "$0" || exit 97; "$1" cache --root "$2" --out "$0/cache"; built=$?; ls -A "$0/cache"; exit $built"#;
    let out = Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "sh", "-c", script])
        .args([&mount, Path::new(env!("CARGO_BIN_EXE_datasets")), dataset.root()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(97) || stderr.contains("unshare failed") {
        eprintln!("skipped: this machine gives no user and mount namespace to mount a small tmpfs in: {stderr}");
        return;
    }
    assert_eq!(out.status.code(), Some(1), "the build ends with an error, not a signal: {:?}\n{stderr}", out.status);
    assert!(
        stderr.contains("/cache/") && stderr.contains(".frames") && stderr.contains("could not reserve"),
        "{stderr}"
    );
    // What the failed build left in the small tmpfs, listed before the namespace (and the tmpfs)
    // went: no frames, whole or temporary.
    let left = String::from_utf8_lossy(&out.stdout);
    assert!(!left.contains(".frames") && !left.contains(RECORD), "left behind: {left}");
}
