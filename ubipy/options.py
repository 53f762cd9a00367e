"""Options declared once, on the configuration's fields, and read from flags and files.

A configuration is a frozen dataclass whose fields are either its own options or
sections (dataclasses of options, one per concern). Each option field carries an
:class:`Option` in its metadata (its help, its flag if it has one), made by
:func:`option`; from those this module builds the ``argparse`` flags, reads a
TOML file of the same shape (top-level keys for the configuration's own options,
one table per section), and builds the configuration from values keyed by dotted
path (``politeness.delay``), so that the command line can lay defaults, a file and
flags over each other and name a bad value as the user wrote it.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import enum
import inspect
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ubipy import __version__
from ubipy.errors import ConfigError

__all__ = [
    "Option",
    "Setting",
    "add_flags",
    "build",
    "coerce",
    "flag_names",
    "flags_given",
    "option",
    "read_file",
    "reference",
    "sections",
    "settings",
]

T = TypeVar("T")

_METADATA_KEY = "ubipy.option"
# The namespace attributes of option flags start with this, so they cannot meet
# other arguments of the same name (the demo's own --listen).
_DEST = "option:"


@dataclass(frozen=True, slots=True)
class Option:
    """How one option is told to the user.

    ``help`` may name the default as ``{default}`` (the value the command in
    question uses) and the section's other defaults by field name."""

    help: str
    flag: str | None = None
    metavar: str | None = None
    choices: tuple[object, ...] | None = None
    # The flag turns a true-by-default option off (``--no-bodies``).
    negated: bool = False
    # ``ubipy peer`` wants it given (its default serves other commands: the demo).
    required: bool = False


def option(
    default: Any = dataclasses.MISSING,
    *,
    factory: Callable[[], Any] | None = None,
    help: str,
    flag: str | None = None,
    metavar: str | None = None,
    choices: tuple[object, ...] | None = None,
    negated: bool = False,
    required: bool = False,
) -> Any:
    """A dataclass field that is an option: ``delay: float = option(1.0, help=...)``."""
    metadata = {_METADATA_KEY: Option(help, flag, metavar, choices, negated, required)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True, slots=True)
class Setting:
    """One option where the configuration holds it."""

    section: str  # "" for the configuration's own options
    name: str
    kind: Any  # the field's type
    default: Any
    option: Option

    @property
    def path(self) -> str:
        return f"{self.section}.{self.name}" if self.section else self.name


def sections(root: type) -> dict[str, type]:
    """The configuration's sections by name, its own options under ``""`` first."""
    hints = typing.get_type_hints(root)
    found: dict[str, type] = {"": root}
    for f in dataclasses.fields(root):
        if dataclasses.is_dataclass(hints[f.name]):
            found[f.name] = hints[f.name]
    return found


def settings(root: type) -> list[Setting]:
    """Every option of the configuration, section by section, in declaration order."""
    found = []
    for section, cls in sections(root).items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            told = f.metadata.get(_METADATA_KEY)
            if told is None:
                continue  # a section
            default = f.default
            if f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            found.append(Setting(section, f.name, hints[f.name], default, told))
    return found


# -- values -----------------------------------------------------------------------


def _plain(kind: Any) -> Any:
    """The type an optional option holds when it holds something."""
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        return next(a for a in typing.get_args(kind) if a is not type(None))
    return kind


def _show(value: object) -> str:
    # A float as written (32.0, not 32: "must be a whole number, not 32" puzzled).
    if isinstance(value, str):
        return repr(value)
    return str(value)


def coerce(setting: Setting, value: object) -> Any:
    """``value`` as the option's type (a file's string as a Path or an enum, a list
    as a tuple); ConfigError, naming the option, if it is of another type."""
    kind = _plain(setting.kind)
    whole = isinstance(value, int) and not isinstance(value, bool)
    if kind is float and (whole or isinstance(value, float)):
        return float(typing.cast(float, value))
    if (kind is int and whole) or (kind in (bool, str) and isinstance(value, kind)):
        return value
    if kind is Path and isinstance(value, str | Path) and str(value):
        # "~/crawl" is the home's, as a shell would read it: a config file's (no shell
        # reads it) and --data=~/crawl (none expands it there) made a directory "~"
        # in the working one (QA).
        try:
            return Path(value).expanduser()
        except RuntimeError:  # ~nosuchuser, or no home: as written (a review)
            return Path(value)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        if isinstance(value, kind):
            return value
        if isinstance(value, str) and value in {m.value for m in kind}:
            return kind(value)
        names = ", ".join(repr(m.value) for m in kind)
        raise ConfigError(f"must be one of {names}, not {_show(value)}", setting.path)
    strings = isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
    if typing.get_origin(kind) is tuple and strings:
        return tuple(typing.cast(list[str], value))
    if typing.get_origin(kind) is tuple and isinstance(value, str):
        return (value,)  # join = "a:7000", as a flag given once (it was refused: QA)
    wanted = {
        bool: "true or false",
        int: "a whole number",
        float: "a number",
        str: "a string",
        Path: "a path (a non-empty string)",
    }.get(kind, "a list of strings")
    raise ConfigError(f"must be {wanted}, not {_show(value)}", setting.path)


def build(root: type[T], values: Mapping[str, Any]) -> T:
    """The configuration with ``values`` (by dotted path) and defaults for the rest.

    Each section checks its values as it is made; a ConfigError names the option
    by its dotted path."""
    known = {s.path: s for s in settings(root)}
    parts: dict[str, dict[str, Any]] = {name: {} for name in sections(root)}
    for path, value in values.items():
        setting = known.get(path)
        if setting is None:
            raise ConfigError("is not an option", path)
        parts[setting.section][setting.name] = coerce(setting, value)
    made: dict[str, Any] = {}
    for name, cls in sections(root).items():
        if name:
            try:
                made[name] = cls(**parts[name])
            except ConfigError as exc:
                raise exc.within(name) from None
    make: Callable[..., T] = root
    return make(**parts[""], **made)


def read_file(root: type, path: Path) -> dict[str, Any]:
    """The values a TOML file gives, by dotted path, each of its option's type.

    Top-level keys are the configuration's own options, each table a section. An
    unreadable file, an unknown table or key, or a value of the wrong type is a
    ConfigError that names the file (and the key)."""
    try:
        # A byte order mark (Notepad writes one) is no TOML: "Invalid statement" at 1:1.
        data = tomllib.loads(path.read_bytes().removeprefix(b"\xef\xbb\xbf").decode())
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: not UTF-8 at byte {exc.start}") from None
    names = sections(root)
    known = {s.path: s for s in settings(root)}
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key and key in names:
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: {key} must be a table ([{key}]), not {_show(value)}")
            items = {f"{key}.{k}": v for k, v in value.items()}
        elif isinstance(value, dict):
            tables = ", ".join(f"[{n}]" for n in names if n)
            raise ConfigError(f"{path}: unknown section [{key}] (the sections: {tables})")
        else:
            items = {key: value}
        for dotted, v in items.items():
            setting = known.get(dotted)
            if setting is None:
                raise ConfigError(f"{path}: unknown option {dotted}{_did_you_mean(dotted, known)}")
            try:
                values[dotted] = coerce(setting, v)
            except ConfigError as exc:
                raise ConfigError(f"{path}: {exc}") from None
    return values


def _did_you_mean(dotted: str, known: Mapping[str, Setting]) -> str:
    """A hint for a key not known: the option whose flag it is (``timeout`` is
    ``[fetch] read_timeout``, --timeout), the option of that name in its section (a
    top-level ``delay`` is ``[politeness] delay``), or the nearest spelling."""
    name = dotted.rpartition(".")[2]
    flag = "--" + name.replace("_", "-")
    flagged = [k for k, s in known.items() if s.option.flag == flag]
    here = [k for k in known if k.rpartition(".")[2] == name]
    near = flagged or here or difflib.get_close_matches(dotted, list(known), n=1)
    if not near:
        return ""
    section, _, key = near[0].rpartition(".")
    return f" (did you mean {f'[{section}] ' if section else ''}{key}?)"


# -- flags ------------------------------------------------------------------------


def _told(value: object) -> str:
    """A default as the help tells it."""
    return str(value.value if isinstance(value, enum.Enum) else value)


def _summary(cls: type) -> str:
    """A section's docstring, its first paragraph, on one line."""
    doc = inspect.cleandoc(cls.__doc__ or "")
    return " ".join(doc.split("\n\n")[0].split())


def _help(setting: Setting, siblings: Iterable[Setting], default: object) -> str:
    others = {s.name: _told(s.default) for s in siblings}
    return setting.option.help.format(**{**others, "default": _told(default)})


def add_flags(
    parser: argparse.ArgumentParser,
    root: type,
    names: Iterable[str],
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """The flags of the options of sections ``names``, one argument group each
    (``""``: the configuration's own options).

    A flag not given leaves nothing on the namespace (so it overrides nothing a
    file gave); its help tells the default, from ``defaults`` (by dotted path)
    where the command has its own."""
    found = settings(root)
    defaults = defaults or {}
    for name in names:
        cls = sections(root)[name]
        siblings = [s for s in found if s.section == name]
        if not any(s.option.flag for s in siblings):
            continue
        group = parser.add_argument_group(name or "peer", _summary(cls) if name else None)
        for s in siblings:
            if s.option.flag is None:
                continue
            told = _help(s, siblings, defaults.get(s.path, s.default)).replace("%", "%%")
            kwargs: dict[str, Any] = {
                "dest": _DEST + s.path,
                "default": argparse.SUPPRESS,
                "help": told,
            }
            kind = _plain(s.kind)
            if kind is bool:
                kwargs["action"] = "store_false" if s.option.negated else "store_true"
            else:
                kwargs["metavar"] = s.option.metavar
                kwargs["choices"] = s.option.choices
                if isinstance(kind, type) and issubclass(kind, enum.Enum):
                    kwargs["choices"] = [m.value for m in kind]
                elif typing.get_origin(kind) is tuple:
                    kwargs["action"] = "append"
                else:
                    # A path stays a string until coerce(), which refuses an empty one
                    # (Path("") is the current directory).
                    kwargs["type"] = str if kind is Path else kind
            group.add_argument(s.option.flag, **kwargs)


def flags_given(args: argparse.Namespace) -> dict[str, Any]:
    """The options given as flags, by dotted path."""
    return {k.removeprefix(_DEST): v for k, v in vars(args).items() if k.startswith(_DEST)}


def flag_names(root: type) -> dict[str, str]:
    """Each option's flag by dotted path, for those that have one."""
    return {s.path: s.option.flag for s in settings(root) if s.option.flag}


# -- docs -------------------------------------------------------------------------


def _toml(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, str | Path | enum.Enum):
        return f'`"{_told(value)}"`'
    if isinstance(value, tuple):
        return "`[]`" if not value else "`[" + ", ".join(f'"{v}"' for v in value) + "]`"
    return f"`{value!r}`"


def reference(root: type) -> str:
    """Every option as Markdown: one table per section, as a config file has them."""
    found = settings(root)
    out: list[str] = []
    for name, cls in sections(root).items():
        out += [f"### [{name}]" if name else "### The top level", "", _summary(cls), ""]
        out += ["| key | default | flag | what it does |", "| --- | --- | --- | --- |"]
        siblings = [s for s in found if s.section == name]
        for s in siblings:
            # Named, not given: the docs would be stale at the next release.
            default = _toml(s.default).replace(__version__, "VERSION")
            default = "required" if s.option.required else default
            flag = f"`{s.option.flag}`" if s.option.flag else ""
            if s.option.negated:
                flag += " (sets `false`)"
            what = _help(s, siblings, s.default).removesuffix(f" (default: {_told(s.default)})")
            what = what.replace("|", "\\|")
            out.append(f"| `{s.name}` | {default} | {flag} | {what} |")
        out.append("")
    return "\n".join(out)
