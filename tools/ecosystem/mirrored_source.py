"""A runtime's source at a tag of its mirror (/work/.mirror/OWNER+NAME/repo), for the checks
that run the exports through a runtime's own code without installing it."""
import os
import subprocess


def extract(mirror, tag, path, directory):
    """`path` of `mirror` at `tag` extracted under `directory` (made here), which is returned;
    None where there is no mirror or it lacks the tag."""
    if not os.path.isdir(mirror):
        return None
    archive = subprocess.run(["git", "--git-dir", mirror, "archive", tag, path], check=False, capture_output=True)
    if archive.returncode != 0:
        return None
    os.makedirs(directory)
    subprocess.run(["tar", "-x", "-C", directory], input=archive.stdout, check=True)
    return directory
