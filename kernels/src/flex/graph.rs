//! [`GraphKernels`] on the CPU: none (no graphs to capture).

use burn::backend::Flex;

use crate::GraphKernels;

impl GraphKernels for Flex {}
