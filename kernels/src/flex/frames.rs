//! [`FrameKernels`] on the CPU: the portable versions (frames converted by burn's operations,
//! uploads as burn's `from_data`; host memory has no largest allocation).

use burn::backend::Flex;

use crate::FrameKernels;

impl FrameKernels for Flex {}
