//! LeRobot's Diffusion Policy in burn and its training loop (built in the trainer issue; this
//! crate is a placeholder until then).
