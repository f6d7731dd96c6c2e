#!/usr/bin/env python3
"""One image recipe: the Dockerfile against the image `make image` writes (deploy/image/build.sh).

    check-dockerfile.py IMAGE.tar [--revision SHA]

No container engine is needed: the Dockerfile is parsed and its final stage's configuration is
worked out as BuildKit would (PATH set first, then each ENV, LABEL, EXPOSE, USER, WORKDIR and
ENTRYPOINT), its ARGs at their defaults but REVISION, given as `docker build --build-arg
REVISION=$(git rev-parse HEAD)` would. That configuration must equal the one inside the tarball.
Besides, the Dockerfile must:
- pin every base image by digest (name:tag@sha256:...), and build on Debian of this machine's
  release, whose glibc, loader and CA bundle `make image` copies; the image must hold glibc;
- end on `FROM scratch` with the root file system of a stage that runs deploy/image/rootfs.sh,
  the script build.sh runs, after the build command that `make release` runs;
and every cargo build, run and install in the Makefile, deploy/dist/, deploy/image/ and the
Dockerfile must pass --locked. Each difference is named; the exit status is 1 when there is one.
"""

import io
import json
import re
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# BuildKit's PATH for a Linux stage whose base sets none (scratch).
DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PINNED = re.compile(r"^[a-z0-9./_-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$")


def instructions(text):
    """(KEYWORD, arguments) for each instruction, continuation lines joined, comments dropped."""
    result, pending = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, arguments = (pending + stripped).partition(" ")
        result.append((keyword.upper(), arguments.strip()))
        pending = ""
    return result


def stages(parsed):
    """The instructions of each stage, each list starting with its FROM."""
    found = []
    for keyword, arguments in parsed:
        if keyword == "FROM":
            found.append([])
        if found:
            found[-1].append((keyword, arguments))
    return found


def expand(value, variables):
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: variables.get(m.group(1) or m.group(2), ""), value)


def pairs(arguments, variables):
    """KEY=VALUE pairs of an ENV, LABEL or ARG, quotes removed and variables expanded."""
    found = []
    for word in shlex.split(arguments):
        key, _, value = word.partition("=")
        found.append((key, expand(value, variables)))
    return found


def set_env(env, key, value):
    """An ENV replaces a variable where it stands, or appends it."""
    for at, entry in enumerate(env):
        if entry.startswith(key + "="):
            env[at] = f"{key}={value}"
            return
    env.append(f"{key}={value}")


def final_config(stage, revision):
    """The run configuration BuildKit writes for the final stage."""
    variables, env = {}, [DEFAULT_PATH]
    config = {"Labels": {}, "ExposedPorts": {}}
    for keyword, arguments in stage[1:]:
        if keyword == "ARG":
            for key, value in pairs(arguments, variables):
                variables[key] = revision if key == "REVISION" else value
        elif keyword == "ENV":
            for key, value in pairs(arguments, variables):
                set_env(env, key, value)
        elif keyword == "LABEL":
            config["Labels"].update(pairs(arguments, variables))
        elif keyword == "EXPOSE":
            config["ExposedPorts"].update({p if "/" in p else p + "/tcp": {} for p in arguments.split()})
        elif keyword == "USER":
            config["User"] = expand(arguments, variables)
        elif keyword == "WORKDIR":
            config["WorkingDir"] = expand(arguments, variables)
        elif keyword in ("ENTRYPOINT", "CMD"):
            config[keyword.capitalize() if keyword == "CMD" else "Entrypoint"] = json.loads(arguments)
    config["Env"] = env
    return config, variables


def image_config(tarball):
    """The image's run configuration and the paths of its root file system."""
    with tarfile.open(tarball) as outer:
        archive = json.load(outer.extractfile("manifest.json"))[0]
        config = json.load(outer.extractfile(archive["Config"]))["config"]
        paths = set()
        for layer in archive["Layers"]:
            with tarfile.open(fileobj=io.BytesIO(outer.extractfile(layer).read())) as inner:
                paths.update(name.lstrip("./") for name in inner.getnames())
    return config, paths


def compare_config(dockerfile, image):
    problems = []
    for field in ("Entrypoint", "Cmd", "User", "WorkingDir", "Env", "ExposedPorts", "Labels"):
        ours, theirs = dockerfile.get(field) or None, image.get(field) or None
        if isinstance(ours, dict) and isinstance(theirs, dict):
            keys = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
            ours, theirs = ({k: d.get(k, "(absent)") for k in keys} for d in (ours, theirs))
        if ours != theirs:
            problems.append(f"{field}: the Dockerfile gives {json.dumps(ours)}, make image {json.dumps(theirs)}")
    return problems


def debian_release():
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip('"')
    return None


def check_bases(all_stages):
    problems, release = [], debian_release()
    for stage in all_stages[:-1]:
        image = stage[0][1].split()[0]
        if not PINNED.match(image):
            problems.append(f"FROM {image}: pin the base image by digest, as name:tag@sha256:<digest>")
        if "alpine" in image or "musl" in image:
            problems.append(f"FROM {image}: a musl base; make image copies glibc, build on Debian")
        elif release and release not in image:
            problems.append(f"FROM {image}: make image copies the glibc of Debian {release}; build on a {release} image")
    if all_stages[-1][0][1].split()[0] != "scratch":
        problems.append(f"the final stage is FROM {all_stages[-1][0][1]}; make image has no base: FROM scratch")
    return problems


def check_root_file_system(all_stages, text, paths):
    problems = []
    steps = [f"{keyword} {arguments}" for keyword, arguments in all_stages[-1] if keyword in ("COPY", "ADD", "RUN")]
    builders = {stage[0][1].split()[-1]: stage for stage in all_stages[:-1] if " AS " in stage[0][1].upper()}
    match = re.fullmatch(r"COPY --from=(\S+) /rootfs/? /", steps[0]) if len(steps) == 1 else None
    builder = builders.get(match.group(1)) if match else None
    if builder is None:
        problems.append(f"the final stage must only COPY --from=<build stage> /rootfs/ /, it has: {steps}")
    elif not any(k == "RUN" and "deploy/image/rootfs.sh target/release/ferro-ipam /rootfs" in a for k, a in builder):
        problems.append("the build stage must run deploy/image/rootfs.sh target/release/ferro-ipam /rootfs, as build.sh does")
    recipe = re.search(r"^release:.*\n\t(.*)$", (ROOT / "Makefile").read_text(), re.M)
    # The command itself, also when the recipe times it: $(call timed,NAME,COMMAND).
    recipe = recipe and recipe.group(1).strip()
    timed = recipe and re.fullmatch(r"\$\(call timed,[^,]*,(.*)\)", recipe)
    recipe = timed.group(1) if timed else recipe
    command = recipe and re.sub(r"^(CARGO=\$\(CARGO\) )?(\$\(CARGO\) )?", lambda m: "cargo " if m.group(2) else "", recipe)
    if not command or command not in text:
        problems.append(f"the Dockerfile does not run make release's command: {command}")
    if any("musl" in arguments for stage in all_stages for _, arguments in stage):
        problems.append("the Dockerfile's instructions name musl; make image is glibc")
    libc = [p for p in paths if re.search(r"(^|/)libc\.so\.6$", p)]
    loader = [p for p in paths if re.search(r"(^|/)ld-linux[^/]*\.so\.\d$", p)]
    if not libc or not loader:
        problems.append(f"the image holds no glibc (libc.so.6 {libc}, loader {loader})")
    return problems


def check_locked():
    problems = []
    files = [ROOT / "Makefile", ROOT / "Dockerfile", *sorted((ROOT / "deploy").glob("*/*.sh"))]
    command = re.compile(r"(?:\bcargo|\$\(CARGO\)|\"\$\w+\") (build|run|install)\b[^\n]*")
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for found in command.finditer(line):
                said = re.search(r"\b(die|log|echo|printf) ", line[: found.start()]) or line.lstrip().startswith("#")
                if "--locked" not in found.group(0) and not said:
                    problems.append(f"{path.relative_to(ROOT)}:{number}: `{found.group(0).strip()}` without --locked")
    return problems


def main():
    if len(sys.argv) not in (2, 4) or (len(sys.argv) == 4 and sys.argv[2] != "--revision"):
        sys.exit("usage: check-dockerfile.py IMAGE.tar [--revision SHA]")
    revision = sys.argv[3] if len(sys.argv) == 4 else subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip() or "unknown"
    text = (ROOT / "Dockerfile").read_text()
    all_stages = stages(instructions(text))
    dockerfile, _ = final_config(all_stages[-1], revision)
    image, paths = image_config(sys.argv[1])
    problems = compare_config(dockerfile, image) + check_bases(all_stages)
    problems += check_root_file_system(all_stages, text, paths) + check_locked()
    for problem in problems:
        print(f"check-dockerfile: FAIL: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"check-dockerfile: ok: the Dockerfile builds the image of {sys.argv[1]}", file=sys.stderr)


if __name__ == "__main__":
    main()
