//! One ledger process per ledger directory: two writers appending to one log would interleave
//! records and corrupt it. The lock is `flock` on `<dir>/lock`, held until the process ends (the
//! kernel drops it on any exit, SIGKILL included), with the holder's pid written inside for the
//! message a second instance prints.

use std::{
    fs::{File, OpenOptions},
    io::{Read, Seek, SeekFrom, Write},
    path::Path,
};

pub const FILE_NAME: &str = "lock";

/// Keep it alive for as long as the process uses the directory.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

pub fn lock(dir: &Path) -> Result<DirLock, String> {
    let path = dir.join(FILE_NAME);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|error| format!("cannot open {}: {error}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {
            let written = file
                .set_len(0)
                .and_then(|()| file.seek(SeekFrom::Start(0)))
                .and_then(|_| file.write_all(format!("{}\n", std::process::id()).as_bytes()));
            written.map_err(|error| format!("cannot write {}: {error}", path.display()))?;
            Ok(DirLock { _file: file })
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = match holder.trim() {
                "" => "unknown pid".to_string(),
                pid => format!("pid {pid}"),
            };
            Err(format!("ledger dir {} is in use by another localnet ({holder}); stop it first", dir.display()))
        }
        Err(std::fs::TryLockError::Error(error)) => Err(format!("cannot lock {}: {error}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_one_directory_is_refused_with_the_holders_pid() {
        let dir = std::env::temp_dir().join(format!("localnet-lock-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let held = lock(&dir).expect("the first lock");
        let refused = lock(&dir).expect_err("a second lock while the first is held");
        assert!(refused.contains(&format!("pid {}", std::process::id())), "{refused}");
        assert!(refused.contains(&dir.display().to_string()), "{refused}");
        drop(held);
        lock(&dir).expect("free again once released");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
