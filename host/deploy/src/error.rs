//! What can go wrong in a deploy or a check.

use std::path::PathBuf;

/// A deploy or check that could not be done.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error(transparent)]
    Io(#[from] kpack_fsafe::IoError),
    /// An ELF file whose dynamic section does not read.
    #[error("{path}: {message}")]
    Elf {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A needed library found nowhere the loader (or the options) look.
    #[error(
        "{name}, needed by {needed_by}: not found (searched {searched}); give its directory with --library-path, or leave it out with --exclude"
    )]
    NotFound {
        /// The DT_NEEDED name (or `--also` name).
        name: String,
        /// Who needs it.
        needed_by: String,
        /// The directories searched, `:`-separated.
        searched: String,
    },
    /// A GPU the inputs have no code for at all.
    #[error(
        "--gpu {gpu}: no input has code for it (the loader would ask for {arch_list}); nothing written"
    )]
    NoCode {
        /// The GPU as given.
        gpu: String,
        /// The names the loader asks for.
        arch_list: String,
    },
    /// An archive a marker finds outside the output directory's layout.
    #[error(
        "{binary}: archive {archive} is not under the directory that will hold the binary's copy's parent; a deployed copy could not find it"
    )]
    Escapes {
        /// The offloaded binary.
        binary: PathBuf,
        /// The archive it loads from.
        archive: PathBuf,
    },
    /// Two different files for one name in the output.
    #[error("{rel}: both {first} and {second} would be deployed under this name")]
    Conflict {
        /// The path in the output directory.
        rel: String,
        /// The first source.
        first: PathBuf,
        /// The second source.
        second: PathBuf,
    },
    /// The runtime library is needed and not found.
    #[error(
        "librocm_kpack.so / rocm_kpack.dll (the kpack runtime the HIP runtime loads offloaded code through) not found beside {beside} nor in --library-path / --rocm-path; give its directory with --library-path"
    )]
    NoRuntime {
        /// The offloaded binary it was looked for beside.
        beside: PathBuf,
    },
    /// `patchelf` failed on a copy.
    #[error("{path}: patchelf --set-rpath failed: {message}")]
    Patchelf {
        /// The staged copy.
        path: PathBuf,
        /// Its stderr, or why it did not start.
        message: String,
    },
    /// A bad `--exclude` glob.
    #[error("--exclude {glob:?}: {message}")]
    Glob {
        /// The glob.
        glob: String,
        /// Why it does not parse.
        message: String,
    },
    /// A PE image that `object` cannot read.
    #[error("{path}: {message}")]
    Pe {
        /// The image.
        path: PathBuf,
        /// Why it does not parse.
        message: String,
    },
    /// Linux and Windows binaries given together.
    #[error("{path}: a Windows PE image deployed with ELF files (one deploy is for one system)")]
    Mixed {
        /// The first input of the other system.
        path: PathBuf,
    },
    /// An input is neither an ELF executable or library nor a directory.
    #[error("{path}: not an ELF or PE executable, shared library (DLL) or directory")]
    NotAnApp {
        /// The input.
        path: PathBuf,
    },
    /// A `--databases` argument that is not a directory.
    #[error("--databases {dir}: not a directory")]
    NotADatabaseDir {
        /// The argument.
        dir: PathBuf,
    },
    /// A database directory under no library directory or install prefix
    /// of the deploy: its place in the output is unknown.
    #[error(
        "{dir}: a database directory under no library directory of the closure nor --rocm-path prefix; its place in the deployed directory is unknown"
    )]
    DatabaseOutside {
        /// The directory.
        dir: PathBuf,
    },
    /// The database handlers did not load.
    #[error("loading the database handlers")]
    Handlers {
        /// Why.
        #[source]
        source: kpack_split::ClassifyError,
    },
    /// The database handlers failed on a directory's files.
    #[error("{dir}: database handlers")]
    Classify {
        /// The database directory.
        dir: PathBuf,
        /// The handlers' error.
        #[source]
        source: kpack_split::ClassifyError,
    },
    /// Offloading a fat library's copy.
    #[error(transparent)]
    Offload(#[from] kpack_offload::Error),
    /// Staging or committing outputs.
    #[error(transparent)]
    Output(#[from] kpack_fsafe::Error),
    /// Pruning a fat library.
    #[error(transparent)]
    Prune(#[from] kpack_prune::Error),
    /// The `verify --gpu` check of the result.
    #[error(transparent)]
    Verify(#[from] kpack_split::Error),
}

impl Error {
    pub(crate) fn io(path: &std::path::Path, what: &'static str, source: std::io::Error) -> Error {
        Error::Io(kpack_fsafe::IoError::new(path, what, source))
    }
}

/// This crate's result.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_error_names_the_file_and_keeps_the_os_error_as_its_source() {
        let e = Error::io(
            std::path::Path::new("a/b"),
            "cannot read",
            std::io::Error::other("disk on fire"),
        );
        assert!(matches!(e, Error::Io(_)));
        assert_eq!(e.to_string(), "a/b: cannot read");
        let cause = std::error::Error::source(&e).expect("the I/O error is the source");
        assert_eq!(cause.to_string(), "disk on fire");
    }
}
