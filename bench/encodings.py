"""How often undeclared legacy pages are given the wrong encoding.

    python bench/encodings.py

Pages with no BOM, no charset in their header and no ``<meta>`` go to detection
(``ubipy.fetch.sniff``: charset-normalizer, then alphabets.py among the Latin code
pages). For each legacy encoding, a few texts are cut into random runs of words,
and each run is made into a page in that encoding: "short", a title and the same
words in the body; "long", a title and the text's whole paragraph. A page is read
wrong when the encoding detected decodes it to other characters than it holds (two
code pages that read it alike are both right). Each page is read twice: from a host
under .com, and from one under its text's country's domain, which may settle what
the bytes leave open (``ubipy.fetch.tlds``: a Latvian title under .lv).
Deterministic: the same figures every run for the same detector.
"""

from __future__ import annotations

import argparse
import random
from collections import Counter

from ubipy.fetch import decode, sniff

TEXTS: dict[str, list[str]] = {
    "cp1252": [
        "Le système de fichiers distribué permet à plusieurs machines d'accéder aux mêmes "
        "données. Chaque nœud conserve une copie partielle, et la cohérence est assurée par un "
        "protocole de réplication élégant.",
        "À la fin du XIXe siècle, les cafés parisiens étaient des lieux de débat où se "
        "croisaient écrivains, peintres et étudiants ; on y lisait les journaux.",
        "Über die Brücke gehen täglich tausende Menschen; die Straßenbahn fährt bis zum "
        "Bahnhof, und im Frühjahr blühen die Bäume entlang des Flusses.",
        "El niño comió una manzana en el jardín. Después, su mamá le preguntó si quería más, "
        "pero él respondió que no. ¡Qué día tan largo!",
        "O coração da cidade está na praça principal, onde as crianças brincam e os idosos "
        "conversam à sombra das árvores. A tradição é mantida há séculos.",
        "Smörgåsbord är ett svenskt bord med många rätter. På julafton äter man skinka, sill "
        "och köttbullar, och barnen väntar på tomten medan snön faller.",
        "Suomen pääkaupunki on Helsinki. Kesällä ihmiset käyvät mökillä, saunovat ja uivat "
        "järvessä; talvella hiihdetään ja syödään lämmintä keittoa.",
        "Veðrið á Íslandi er breytilegt, og á veturna er dimmt mestallan daginn. Börnin fara "
        "í sund eftir skóla og borða fisk með kartöflum.",
    ],
    "cp1250": [
        "Příliš žluťoučký kůň úpěl ďábelské ódy. Většina obyvatel města žije v panelových "
        "domech, které byly postaveny v sedmdesátých letech minulého století.",
        "Zażółć gęślą jaźń. W Polsce jest wiele pięknych miast, a każde z nich ma swoją "
        "historię; Kraków słynie z zabytków, Gdańsk z portu, a Wrocław z mostów.",
        "Árvíztűrő tükörfúrógép. A magyar nyelv különleges, mert sok magánhangzót használ, és "
        "a szavak végéhez ragokat illesztünk.",
        "Kočka leží na střeše a dívá se na ptáky, kteří létají nad zahradou. Děti si hrají "
        "venku, zatímco babička vaří oběd a dědeček čte noviny v křesle.",
        "Ľudia na Slovensku radi chodia do hôr. Vysoké Tatry sú najvyššie pohorie krajiny; v "
        "lete tam turisti stúpajú na štíty a v zime lyžujú.",
    ],
    "cp1257": [
        "Lietuvos sostinė yra Vilnius, o didžiausi miestai – Kaunas ir Klaipėda. Žmonės čia "
        "mėgsta šventes, dainas ir šokius, ypač vasarą, kai dienos ilgos.",
        "Latvijas galvaspilsēta ir Rīga, kas atrodas pie Daugavas. Vasarā cilvēki brauc uz "
        "jūrmalu, bet ziemā slēpo un slido; Jāņi ir vissvarīgākie svētki.",
    ],
    "cp1254": [
        "Türkiye'nin başkenti Ankara'dır, en kalabalık şehri ise İstanbul'dur. Çocuklar "
        "okulda öğretmenlerini dinliyor, ağaçların gölgesinde oyun oynuyorlar.",
    ],
    "iso8859_2": [
        "Zażółć gęślą jaźń. W Polsce jest wiele pięknych miast, a każde z nich ma swoją "
        "historię; Kraków słynie z zabytków, Gdańsk z portu.",
    ],
    "cp1251": [
        "Распределённый веб-краулер должен учитывать планирование, удаление дубликатов, "
        "хранение данных и вежливость по отношению к сайтам."
    ],
    "gbk": ["分布式 网络爬虫的 设计与实现 是一个 复杂的问题 需要考虑 许多方面 包括调度 去重 存储"],
    "big5": ["分散式 網路爬蟲的 設計與實現 是一個 複雜的問題 需要考慮 許多方面 包括排程 去重"],
    "shift_jis": [
        "分散型 ウェブクローラーの 設計と実装は 複雑な問題であり スケジューリング 重複排除 "
        "保存 礼儀正しさなど 多くの側面を 考慮する必要が あります"
    ],
}


# Each text's country's top-level domain, in the order of TEXTS: where a page of it
# would be found, for the runs with its host's domain (ubipy.fetch.tlds).
DOMAINS: dict[str, list[str]] = {
    "cp1252": ["fr", "fr", "de", "es", "pt", "se", "fi", "is"],
    "cp1250": ["cz", "pl", "hu", "cz", "sk"],
    "cp1257": ["lt", "lv"],
    "cp1254": ["tr"],
    "iso8859_2": ["pl"],
    "cp1251": ["ru"],
    "gbk": ["cn"],
    "big5": ["tw"],
    "shift_jis": ["jp"],
}


def wrong(runs: int, seed: int, domains: bool) -> dict[tuple[str, str], tuple[int, int]]:
    """(encoding, "short" or "long") -> (pages read wrong, pages); ``domains``: each
    page's host under its text's country's domain, else under .com."""
    rng = random.Random(seed)
    counts: Counter[tuple[str, str, bool]] = Counter()
    for codec, texts in TEXTS.items():
        for text, tld in zip(texts, DOMAINS[codec], strict=True):
            host = f"www.example.{tld if domains else 'com'}"
            words = text.split()
            for _ in range(runs):
                a = rng.randrange(0, max(1, len(words) // 2))
                b = rng.randrange(min(a + 3, len(words)), len(words) + 1)
                title = " ".join(words[a : max(b, a + 1)])
                for size, body_text in (("short", title), ("long", text)):
                    html = f"<html><head><title>{title}</title></head><body><p>{body_text}</p>"
                    body = html.encode(codec)
                    ok = decode(body, sniff(body, host=host)) == html
                    counts[codec, size, ok] += 1
    return {
        (codec, size): (
            counts[codec, size, False],
            counts[codec, size, False] + counts[codec, size, True],
        )
        for codec in TEXTS
        for size in ("short", "long")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="runs of words per text (default 30)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    for domains in (False, True):
        result = wrong(args.runs, args.seed, domains)
        print("\nhosts under " + ("their country's domain" if domains else ".com"))
        print(f"{'encoding':<10} {'short: wrong':>14} {'long: wrong':>14}")
        for codec in TEXTS:
            short, long = result[codec, "short"], result[codec, "long"]
            print(f"{codec:<10} {short[0]:>6} of {short[1]:<5} {long[0]:>6} of {long[1]:<5}")


if __name__ == "__main__":
    main()
