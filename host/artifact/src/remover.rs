//! Removing scratch directories in the background. Freeing a spooled
//! gigabyte binary's blocks, or a packed output's archives, takes the file
//! system a good part of a second; the split need not wait for it.

use std::path::PathBuf;
use std::sync::mpsc::Sender;

/// Removes directories on a thread of its own; dropping it waits for
/// every removal.
pub struct Remover {
    queue: Option<Sender<PathBuf>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Remover {
    /// Start the removing thread (without one, removals are done at once).
    pub fn start() -> Remover {
        let (queue, dirs) = std::sync::mpsc::channel::<PathBuf>();
        let thread = std::thread::Builder::new()
            .name("kpack-remover".into())
            .spawn(move || {
                for dir in dirs {
                    let _ = std::fs::remove_dir_all(dir);
                }
            })
            .ok();
        Remover {
            queue: thread.is_some().then_some(queue),
            thread,
        }
    }

    /// Remove the directory `dir` (errors are ignored: it is inside the
    /// staging directory, removed at the end whatever happens).
    pub fn remove(&self, dir: PathBuf) {
        let dir = match &self.queue {
            Some(q) => match q.send(dir) {
                Ok(()) => return,
                Err(e) => e.0,
            },
            None => dir,
        };
        let _ = std::fs::remove_dir_all(dir);
    }
}

impl Drop for Remover {
    fn drop(&mut self) {
        self.queue.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
