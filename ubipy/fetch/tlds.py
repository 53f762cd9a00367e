"""The legacy encoding a country's top-level domain suggests, as browsers guess it.

A page that declares no encoding and whose bytes fit more than one equally well
("pięknych" in ISO 8859-2 reads "piêknych" in windows-1252, French letters both; the
Latvian "ziemā" in windows-1257 reads "ziemâ") is settled by where it comes from, as
Firefox settles it: its fallback for unlabelled pages is the encoding that legacy
content under the host's top-level domain assumed, windows-1252 where none is
listed (Firefox's ``domainsfallbacks.properties``, whose choices this table follows;
the WHATWG HTML standard leaves the default to the user agent and names this as one
way). Internationalised TLDs are listed by their punycode, as hosts are kept.
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = ["Hint", "hint_of"]

# WHATWG name -> the top-level domains whose legacy pages were mostly in it.
_BY_ENCODING: Final = {
    "windows-1250": "cz hr sk",
    "iso-8859-2": "hu pl si",
    "windows-1251": (
        "bg by kg kz mk mn rs ru su tj ua uz xn--80ao21a xn--l1acc xn--90a3ac xn--p1ai xn--j1amh"
    ),
    "windows-1254": "tr",
    "windows-1256": (
        "ae af bh dz eg iq ir jo kw lb ma om qa sa sd sy tn ye "
        "xn--mgbaam7a8h xn--lgbbat1ad8j xn--wgbh1c xn--mgba3a4f16a xn--mgbayh7gpa "
        "xn--mgbc0a9azcg xn--mgbx4cd0ab xn--mgb9awbf xn--mgbai9azgqp6j xn--ygbi2ammx "
        "xn--wgbl6a xn--mgberp4a5d4ar xn--mgbpl2fh xn--mgbtf8fl xn--pgbs0dh xn--mgb2ddes"
    ),
    "windows-1257": "ee lt lv",
    "windows-1258": "vn",
    "windows-874": "th xn--o3cw4h",
    "iso-8859-7": "gr",
    "gbk": "cn sg xn--fiqs8s xn--fiqz9s xn--yfro4i67o",
    "big5": "hk mo tw xn--j6w193g xn--kprw13d xn--kpry57d",
    "shift_jis": "jp",
    "euc-kr": "kp kr xn--3e0b707e",
}
_BY_TLD: Final = {tld: name for name, tlds in _BY_ENCODING.items() for tld in tlds.split()}
# Where that encoding is a Latin code page, the country's language (alphabets.py): a
# reading is the country's only in its letters. Polish in ISO 8859-2 reads as French
# in windows-1252, but French "système" read in ISO 8859-2 is "systčme", no Polish.
_LANGUAGES: Final = {
    "cz": "czech",
    "sk": "slovak",
    "pl": "polish",
    "hu": "hungarian",
    "si": "serbo-croatian, slovene",
    "hr": "serbo-croatian, slovene",
    "lt": "lithuanian",
    "lv": "latvian",
    "ee": "estonian",
    "tr": "turkish",
    "vn": "vietnamese",
}


class Hint(NamedTuple):
    """What a host's top-level domain suggests: the encoding its legacy pages were
    mostly in (by WHATWG name), and for a Latin code page, the language they were
    written in."""

    encoding: str
    language: str | None


def hint_of(host: str) -> Hint | None:
    """What ``host``'s top-level domain suggests (a name, or a ``HOST[:PORT]`` key), or
    None where windows-1252 (the default) is what its legacy pages were in."""
    name = host if host.startswith("[") else host.partition(":")[0]
    tld = name.rstrip(".").rpartition(".")[2].lower()
    encoding = _BY_TLD.get(tld)
    return None if encoding is None else Hint(encoding, _LANGUAGES.get(tld))
