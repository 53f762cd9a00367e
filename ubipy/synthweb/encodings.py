"""The encodings web (`WebSpec(encodings=True)`): hosts whose pages are in legacy
encodings, declared every way a page can declare one, or not at all, and a host with
an internationalised name.

Hosts `enc-<case>.<domain>`, each linked from h000's home page, each with three pages:
`/` (linking the other two), `/about.html` and an article under a path in the page's
own script (`/文章/1.html`), whose href a crawler can only resolve to the right URL (its
UTF-8 percent-encoding) if it read the page in the right encoding. Titles, headings,
paragraphs and link texts are in the page's script, amid ASCII filler, as on real pages.

| case | bytes | header charset | in the page | read as |
|---|---|---|---|---|
| gbk | GBK | none | nothing | gbk, detected |
| gbk-wrong-meta | GBK | none | `<meta charset="utf-8">` | gbk, detected (the meta lies) |
| big5 | Big5 | none | `<meta http-equiv=Content-Type ...charset=big5>` | big5, meta |
| shift-jis | Shift_JIS | Shift_JIS | nothing | shift_jis, header |
| euc-kr | EUC-KR | none | `<meta charset="euc-kr">` | euc-kr, meta |
| windows-1251 | cp1251 | windows-1251 | `<meta charset="windows-1251">` | windows-1251, header |
| utf-8-bom | UTF-8, a BOM | iso-8859-1 (wrong) | nothing | utf-8, bom |

The GBK home page links `http://网络爬虫.<domain>/` by its Unicode name: the host is
`xn--p0xp4y9jao6v.<domain>` on the wire (IDNA, here by the standard library's codec,
independent of the crawler's), a UTF-8 page reached only through that link.

Every host serves 404 for /robots.txt. What a crawler should find is in `titles` and
`encodings` (URL -> expected title; URL -> (WHATWG encoding name, what decided it)).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from html import escape
from urllib.parse import quote

from ubipy.synthweb.render import Link, filler
from ubipy.synthweb.spec import Page, Response, WebView


@dataclass(frozen=True, slots=True)
class Script:
    """The texts of one host's pages, in one language."""

    lang: str
    home: str  # the titles of the three pages
    about: str
    article: str
    about_link: str  # link texts
    article_link: str
    home_link: str
    paragraph: str
    folder: str  # the article's folder: a path segment in this script


@dataclass(frozen=True, slots=True)
class Case:
    codec: str  # Python codec the bytes are written in
    encoding: str  # the WHATWG name a crawler should report
    source: str  # what should decide it: bom, header, meta, detected, default
    script: Script
    header: str | None = None  # the Content-Type charset, None for none
    meta: str = ""  # the declaration in <head>
    bom: bool = False


_ZH_HANS = Script(
    "zh-Hans",
    "分布式网络爬虫的设计与实现",
    "关于本站：网页抓取与存储",
    "第一章 网络爬虫概述",
    "关于我们",
    "阅读第一章",
    "返回首页",
    "网络爬虫是一种按照一定的规则，自动地抓取万维网信息的程序或者脚本。",
    "文章",
)
_ZH_HANS_2 = Script(
    "zh-Hans",
    "基于一致性哈希的任务分配",
    "系统架构与节点管理",
    "第二章 对等网络中的任务迁移",
    "关于我们",
    "阅读第二章",
    "返回首页",
    "每个节点负责一部分主机，当节点加入或离开时，只有少量主机需要迁移。",
    "论文",
)
_ZH_HANT = Script(
    "zh-Hant",
    "分散式網路爬蟲的設計與實現",
    "關於我們：網頁擷取與儲存",
    "第一章 網路爬蟲概述",
    "關於我們",
    "閱讀第一章",
    "返回首頁",
    "網路爬蟲是一種按照一定的規則，自動地擷取全球資訊網資訊的程式。",
    "文章",
)
_JA = Script(
    "ja",
    "分散型ウェブクローラの設計と実装",
    "このサイトについて",
    "第一章 クローラの概要",
    "会社概要",
    "第一章を読む",
    "ホームへ戻る",
    "ウェブクローラは、ウェブページを自動的に収集するプログラムです。",
    "記事",
)
_KO = Script(
    "ko",
    "분산 웹 크롤러의 설계와 구현",
    "사이트 소개",
    "제1장 웹 크롤러 개요",
    "소개",
    "제1장 읽기",
    "처음으로",
    "웹 크롤러는 조직적, 자동화된 방법으로 월드 와이드 웹을 탐색하는 프로그램이다.",
    "문서",
)
_RU = Script(
    "ru",
    "Проектирование распределённого поискового робота",
    "О проекте",
    "Глава первая: обзор поисковых роботов",
    "О нас",
    "Читать первую главу",
    "На главную",
    "Поисковый робот — программа, являющаяся составной частью поисковой системы.",
    "статьи",
)
_EL = Script(
    "el",
    "Σχεδίαση κατανεμημένου ανιχνευτή ιστού",
    "Σχετικά με εμάς",
    "Κεφάλαιο πρώτο",
    "Σχετικά",
    "Διαβάστε το πρώτο κεφάλαιο",
    "Αρχική σελίδα",
    "Ο ανιχνευτής ιστού είναι πρόγραμμα που συλλέγει σελίδες αυτόματα.",
    "άρθρα",
)
_IDN_SCRIPT = Script(
    "zh-Hans",
    "网络爬虫站点",
    "关于网络爬虫站点",
    "",
    "关于",
    "",
    "返回首页",
    "这个主机的名字是中文的：在请求中它是 Punycode，在导出中它是中文。",
    "",
)

CASES: dict[str, Case] = {
    "gbk": Case("gbk", "gbk", "detected", _ZH_HANS),
    "gbk-wrong-meta": Case("gbk", "gbk", "detected", _ZH_HANS_2, meta='<meta charset="utf-8">'),
    "big5": Case(
        "big5",
        "big5",
        "meta",
        _ZH_HANT,
        meta='<meta http-equiv="Content-Type" content="text/html; charset=big5">',
    ),
    "shift-jis": Case("shift_jis", "shift_jis", "header", _JA, header="Shift_JIS"),
    "euc-kr": Case("euc_kr", "euc-kr", "meta", _KO, meta='<meta charset="euc-kr">'),
    "windows-1251": Case(
        "cp1251",
        "windows-1251",
        "header",
        _RU,
        header="windows-1251",
        meta='<meta charset="windows-1251">',
    ),
    "utf-8-bom": Case("utf-8", "utf-8", "bom", _EL, header="iso-8859-1", bom=True),
}
IDN_LABEL = "网络爬虫"
_IDN_CASE = Case("utf-8", "utf-8", "header", _IDN_SCRIPT, header="utf-8")
_FILLER_BYTES = 1200  # ASCII filler per page, half before the links and half after


class EncodingWeb:
    def __init__(self, web: WebView) -> None:
        self.web = web
        domain = web.spec.domain
        self.idn_host = f"{IDN_LABEL.encode('idna').decode('ascii')}.{domain}"
        self.hosts: dict[str, Case] = {f"enc-{c}.{domain}": case for c, case in CASES.items()}
        self.hosts[self.idn_host] = _IDN_CASE
        self.pages: dict[str, Page] = {}
        self.titles: dict[str, str] = {}
        self.encodings: dict[str, tuple[str, str]] = {}
        self._cases: dict[str, Case] = {}
        for host, case in self.hosts.items():
            self._build(host, case)

    def home_links(self) -> tuple[Link, ...]:
        """h000's links to every encoding host but the one reached only by its name."""
        homes = (f"http://{h}/" for h in self.hosts if h != self.idn_host)
        return tuple(Link("a", u, u, text="encodings") for u in homes)

    def _add(self, url: str, case: Case, title: str, links: tuple[Link, ...]) -> None:
        self.pages[url] = Page(url, title, links, special="encoding")
        self.titles[url] = title
        self.encodings[url] = (case.encoding, case.source)
        self._cases[url] = case

    def _build(self, host: str, case: Case) -> None:
        s = case.script
        root = f"http://{host}"
        home = Link("a", "/", f"{root}/", text=s.home_link)
        about = Link("a", "about.html", f"{root}/about.html", text=s.about_link)
        links = [about]
        if s.folder:
            path = f"/{s.folder}/1.html"
            # The href is written in the page's script; the URL is its UTF-8 escape.
            article = Link("a", path, root + quote(path), text=s.article_link)
            links.append(article)
            self._add(article.target or "", case, s.article, (home,))
        if host == f"enc-gbk.{self.web.spec.domain}":
            idn = f"http://{IDN_LABEL}.{self.web.spec.domain}/"
            links.append(Link("a", idn, f"http://{self.idn_host}/", text="访问网络爬虫站点"))
        self._add(f"{root}/", case, s.home, tuple(links))
        self._add(f"{root}/about.html", case, s.about, (home,))

    def page(self, url: str) -> Page | None:
        """The page at a normalised URL of an encoding host; None for a 404."""
        return self.pages.get(url)

    def respond(self, url: str) -> Response | None:
        page = self.pages.get(url)
        if page is None:
            return None
        case = self._cases[url]
        rng = random.Random(f"synthweb-encodings:{self.web.spec.seed}:{url}")
        half = _FILLER_BYTES // 2
        items = "".join(
            f'<li><a href="{escape(x.href, quote=True)}">{escape(x.text)}</a></li>'
            for x in page.links
        )
        html = (
            f'<!DOCTYPE html>\n<html lang="{case.script.lang}"><head>{case.meta}'
            f"<title>{escape(page.title)}</title></head>\n"
            f"<body><h1>{escape(page.title)}</h1>\n<p>{filler(rng, half)}</p>\n"
            f"<p>{escape(case.script.paragraph)}</p>\n<ul>{items}</ul>\n"
            f"<p>{filler(rng, _FILLER_BYTES - half)}</p></body></html>\n"
        )
        body = html.encode(case.codec)
        if case.bom:
            body = b"\xef\xbb\xbf" + body
        ctype = "text/html" if case.header is None else f"text/html; charset={case.header}"
        return Response(200, (("Content-Type", ctype),), body)
