//! Directory handles for committing outputs: a path inside an output root
//! is reached from the root's handle one component at a time, never
//! following a symlink, so a directory swapped for a symlink while a
//! command runs cannot send an output outside the root.

use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

/// An open directory (Unix: a file descriptor; elsewhere: its path, with
/// every component checked not to be a symlink).
pub(crate) struct Dir {
    #[cfg(unix)]
    fd: std::os::fd::OwnedFd,
    /// For messages, and the whole handle where there are no descriptors.
    path: PathBuf,
}

/// What is at a path of a [`crate::Tree`] (a symlink is not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symlink.
    Symlink,
    /// Anything else (a FIFO, a device, a socket).
    Other,
}

/// The single normal components of `rel`, or an error for anything else.
pub(crate) fn components(rel: &Path) -> io::Result<Vec<OsString>> {
    rel.components()
        .map(|c| match c {
            Component::Normal(n) => Ok(n.to_os_string()),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a plain relative path", rel.display()),
            )),
        })
        .collect()
}

/// The error for a symlink met where a directory must be.
fn symlink_in_the_way(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{} is a symlink or not a directory; outputs are never written through one",
            path.display()
        ),
    )
}

#[cfg(unix)]
mod imp {
    use std::ffi::OsStr;
    use std::io;
    use std::path::Path;

    use rustix::fs::{AtFlags, Mode, OFlags};

    use super::{Dir, symlink_in_the_way};

    const DIR_FLAGS: OFlags = OFlags::RDONLY
        .union(OFlags::DIRECTORY)
        .union(OFlags::NOFOLLOW)
        .union(OFlags::CLOEXEC);

    impl Dir {
        /// Open the directory `path` (a symlink naming the root itself is
        /// followed: the root is the caller's choice).
        pub(crate) fn open(path: &Path) -> io::Result<Dir> {
            let fd = rustix::fs::open(
                path,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            Ok(Dir {
                fd,
                path: path.to_path_buf(),
            })
        }

        /// The subdirectory `name`, created (mode `0777 & !umask`) when
        /// missing and `create`; never through a symlink. Returns whether it
        /// was created.
        pub(crate) fn child(&self, name: &OsStr, create: bool) -> io::Result<(Dir, bool)> {
            let path = self.path.join(name);
            let open = || rustix::fs::openat(&self.fd, name, DIR_FLAGS, Mode::empty());
            // Opened first: on the way to a file the directories mostly
            // exist already, and one `openat` is all they cost.
            let (fd, made) = match open() {
                Err(rustix::io::Errno::NOENT) if create => {
                    let made = match rustix::fs::mkdirat(
                        &self.fd,
                        name,
                        Mode::from_bits_truncate(0o777),
                    ) {
                        Ok(()) => true,
                        Err(rustix::io::Errno::EXIST) => false,
                        Err(e) => return Err(e.into()),
                    };
                    (open(), made)
                }
                other => (other, false),
            };
            match fd {
                Ok(fd) => Ok((Dir { fd, path }, made)),
                Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
                    Err(symlink_in_the_way(&path))
                }
                Err(e) => Err(e.into()),
            }
        }

        /// Whether `name` exists in this directory (a symlink counts).
        pub(crate) fn exists(&self, name: &OsStr) -> bool {
            rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW).is_ok()
        }

        /// Rename `from`/`a` to `to`/`b`.
        pub(crate) fn rename(from: &Dir, a: &OsStr, to: &Dir, b: &OsStr) -> io::Result<()> {
            rustix::fs::renameat(&from.fd, a, &to.fd, b)?;
            Ok(())
        }

        /// Rename `from`/`a` to `to`/`b`, failing when `b` exists.
        pub(crate) fn rename_noreplace(
            from: &Dir,
            a: &OsStr,
            to: &Dir,
            b: &OsStr,
        ) -> io::Result<()> {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            {
                rustix::fs::renameat_with(
                    &from.fd,
                    a,
                    &to.fd,
                    b,
                    rustix::fs::RenameFlags::NOREPLACE,
                )?;
                Ok(())
            }
            #[cfg(not(any(target_os = "linux", target_os = "android")))]
            {
                if to.exists(b) {
                    return Err(io::ErrorKind::AlreadyExists.into());
                }
                Dir::rename(from, a, to, b)
            }
        }

        /// Create the regular file `name` here (exclusive, never through a
        /// symlink) with the permission bits `mode`.
        pub(crate) fn create_file(&self, name: &OsStr, mode: u32) -> io::Result<std::fs::File> {
            let flags =
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(&self.fd, name, flags, Mode::from_bits_truncate(mode))?;
            // The umask may have taken bits the member asked for.
            rustix::fs::fchmod(&fd, Mode::from_bits_truncate(mode))?;
            Ok(std::fs::File::from(fd))
        }

        /// Open the regular file `name` here for reading, never through a
        /// symlink.
        pub(crate) fn open_file(&self, name: &OsStr) -> io::Result<std::fs::File> {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
            let fd = rustix::fs::openat(&self.fd, name, flags, Mode::empty())?;
            let st = rustix::fs::fstat(&fd)?;
            if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile
            {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not a regular file", self.path.join(name).display()),
                ));
            }
            Ok(std::fs::File::from(fd))
        }

        /// What `name` is here (a symlink not followed).
        pub(crate) fn entry(&self, name: &OsStr) -> Option<super::Entry> {
            use super::Entry;
            let st = rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
            Some(match rustix::fs::FileType::from_raw_mode(st.st_mode) {
                rustix::fs::FileType::RegularFile => Entry::File,
                rustix::fs::FileType::Directory => Entry::Dir,
                rustix::fs::FileType::Symlink => Entry::Symlink,
                _ => Entry::Other,
            })
        }

        /// The target of the symlink `name` here.
        pub(crate) fn read_link(&self, name: &OsStr) -> io::Result<std::path::PathBuf> {
            use std::os::unix::ffi::OsStringExt;
            let t = rustix::fs::readlinkat(&self.fd, name, Vec::new())?;
            Ok(std::ffi::OsString::from_vec(t.into_bytes()).into())
        }

        /// Create the symlink `name` here, pointing at `target`.
        pub(crate) fn symlink(&self, target: &Path, name: &OsStr) -> io::Result<()> {
            rustix::fs::symlinkat(target, &self.fd, name)?;
            Ok(())
        }

        /// Link `from`/`a` (not followed if a symlink) as `to`/`b`.
        pub(crate) fn hard_link(from: &Dir, a: &OsStr, to: &Dir, b: &OsStr) -> io::Result<()> {
            rustix::fs::linkat(&from.fd, a, &to.fd, b, AtFlags::empty())?;
            Ok(())
        }
    }
}

#[cfg(not(unix))]
mod imp {
    use std::ffi::OsStr;
    use std::io;
    use std::path::Path;

    use super::{Dir, symlink_in_the_way};

    impl Dir {
        /// Open the directory `path`.
        pub(crate) fn open(path: &Path) -> io::Result<Dir> {
            if !std::fs::metadata(path)?.is_dir() {
                return Err(symlink_in_the_way(path));
            }
            Ok(Dir {
                path: path.to_path_buf(),
            })
        }

        /// The subdirectory `name`, created when missing and `create`;
        /// never a symlink. Returns whether it was created.
        pub(crate) fn child(&self, name: &OsStr, create: bool) -> io::Result<(Dir, bool)> {
            let path = self.path.join(name);
            let mut made = false;
            if create && std::fs::symlink_metadata(&path).is_err() {
                std::fs::create_dir(&path)?;
                made = true;
            }
            let meta = std::fs::symlink_metadata(&path)?;
            if meta.file_type().is_symlink() || !meta.is_dir() {
                return Err(symlink_in_the_way(&path));
            }
            Ok((Dir { path }, made))
        }

        /// Whether `name` exists in this directory (a symlink counts).
        pub(crate) fn exists(&self, name: &OsStr) -> bool {
            std::fs::symlink_metadata(self.path.join(name)).is_ok()
        }

        /// Rename `from`/`a` to `to`/`b`.
        pub(crate) fn rename(from: &Dir, a: &OsStr, to: &Dir, b: &OsStr) -> io::Result<()> {
            std::fs::rename(from.path.join(a), to.path.join(b))
        }

        /// Rename `from`/`a` to `to`/`b`, failing when `b` exists.
        pub(crate) fn rename_noreplace(
            from: &Dir,
            a: &OsStr,
            to: &Dir,
            b: &OsStr,
        ) -> io::Result<()> {
            if to.exists(b) {
                return Err(io::ErrorKind::AlreadyExists.into());
            }
            Dir::rename(from, a, to, b)
        }

        /// Create the regular file `name` here (exclusive; a symlink there
        /// is an error).
        pub(crate) fn create_file(&self, name: &OsStr, _mode: u32) -> io::Result<std::fs::File> {
            std::fs::File::create_new(self.path.join(name))
        }

        /// Open the regular file `name` here for reading (not a symlink).
        pub(crate) fn open_file(&self, name: &OsStr) -> io::Result<std::fs::File> {
            let p = self.path.join(name);
            if !std::fs::symlink_metadata(&p)?.is_file() {
                return Err(symlink_in_the_way(&p));
            }
            std::fs::File::open(p)
        }

        /// What `name` is here (a symlink not followed).
        pub(crate) fn entry(&self, name: &OsStr) -> Option<super::Entry> {
            use super::Entry;
            let m = std::fs::symlink_metadata(self.path.join(name)).ok()?;
            let t = m.file_type();
            Some(if t.is_symlink() {
                Entry::Symlink
            } else if t.is_dir() {
                Entry::Dir
            } else if t.is_file() {
                Entry::File
            } else {
                Entry::Other
            })
        }

        /// The target of the symlink `name` here.
        pub(crate) fn read_link(&self, name: &OsStr) -> io::Result<std::path::PathBuf> {
            std::fs::read_link(self.path.join(name))
        }

        /// Create the symlink `name` here, pointing at `target`.
        pub(crate) fn symlink(&self, target: &Path, name: &OsStr) -> io::Result<()> {
            let link = self.path.join(name);
            let to_dir = self.path.join(target).is_dir();
            if to_dir {
                std::os::windows::fs::symlink_dir(target, link)
            } else {
                std::os::windows::fs::symlink_file(target, link)
            }
        }

        /// Link `from`/`a` as `to`/`b`.
        pub(crate) fn hard_link(from: &Dir, a: &OsStr, to: &Dir, b: &OsStr) -> io::Result<()> {
            std::fs::hard_link(from.path.join(a), to.path.join(b))
        }
    }
}

impl Dir {
    /// The directory's path (for messages).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The directory holding `rel` (reached from this one, its missing
    /// directories created and their paths relative to this one appended
    /// to `made`) and `rel`'s last component.
    pub(crate) fn walk_to_parent(
        &self,
        rel: &Path,
        made: &mut Vec<PathBuf>,
    ) -> io::Result<(Dir, OsString)> {
        let mut parts = components(rel)?;
        let Some(last) = parts.pop() else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty path"));
        };
        let mut dir = self.reopen()?;
        let mut at = PathBuf::new();
        for p in parts {
            at.push(&p);
            let (next, created) = dir.child(&p, true)?;
            if created {
                made.push(at.clone());
            }
            dir = next;
        }
        Ok((dir, last))
    }

    /// Whether the directory is still linked into the file system (not
    /// removed since it was opened).
    pub(crate) fn is_linked(&self) -> bool {
        #[cfg(unix)]
        {
            rustix::fs::fstat(&self.fd).is_ok_and(|st| st.st_nlink > 0)
        }
        #[cfg(not(unix))]
        {
            self.path.is_dir()
        }
    }

    /// A second handle on this directory.
    pub(crate) fn reopen(&self) -> io::Result<Dir> {
        #[cfg(unix)]
        {
            Ok(Dir {
                fd: self.fd.try_clone()?,
                path: self.path.clone(),
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Dir {
                path: self.path.clone(),
            })
        }
    }
}
