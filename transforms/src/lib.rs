//! Image transforms on the training device as burn tensor ops: uint8 upload, crops, resize,
//! colour jitter and normalisation with the dataset's statistics (built in the transforms
//! issue; this crate is a placeholder until then).
