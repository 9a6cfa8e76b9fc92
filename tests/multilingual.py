"""Text in many scripts, written for the tests: what tokens and subwords must carry intact."""

import unicodedata

# One or more sentences per script or case that text must survive on its way through the
# course, from German to emoji, quotes and URLs.
SAMPLE = {
    "German": "Das Mädchen läuft schnell über die Straße.",
    "German, decomposed": unicodedata.normalize("NFD", "Das Mädchen läuft über die Straße."),
    "French": "L'élève n'a pas vu l'herbe, n'est-ce pas ?",
    "Russian": "Съешь же ещё этих мягких французских булок.",
    "Greek": "Η γρήγορη καφέ αλεπού πηδά πάνω από τον σκύλο.",
    "Arabic": "العَرَبِيَّة لغة جميلة، أليس كذلك؟",
    "Hebrew": "עִבְרִית היא שפה שמית.",
    "Hindi": "हिन्दी भारत की एक भाषा है।",
    "Thai": "ภาษาไทย ง่ายนิดเดียว",
    "Chinese": "我们今天去公园散步。",
    "Japanese": "日本語の文章です。ありがとう！",
    "Korean": "한국어 문장입니다. 감사합니다!",
    "emoji": "Great job 👍🏽 🇩🇪 👨‍👩‍👧!",
    "quotes": "\"Yes,\" she said, «oui» and „ja“.",
    "apostrophes": "I don't know; it's Tom's.",
    "decimals": "It costs 3.5% more, about 1,250.75 euros.",
    "URL": "See https://example.org/a-b?x=1 for more.",
    "elisions": "J'aime l'été qu'il fait ; c'est « bien », n'est-ce pas ?",
    "contractions": "I don't know, isn't it? We'll see: they're late.",
    "dashes": "twenty - one, twenty-one, -5 and 1990-2000 — a dash.",
    "special strings": "the <pad> and <eos>, <unk> and <bos> tags, a ▁ and a ￭: ▁▁x￭ ￭.",
    # A prepended mark (U+0600, U+070F) would join the space after it into one cluster, and
    # U+001C is whitespace to str.split though not to a regex.
    "whitespace's edges": "رقم \u0600  ١٢٣ and\x1cthen \u070f end.",
}
