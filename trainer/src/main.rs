//! `trainer`: trains a Diffusion Policy on a LeRobot dataset (not built yet).
fn main() {
    eprintln!("error: the trainer is not implemented yet (see the trainer issue)");
    std::process::exit(2);
}
