// Package extract turns the conversation of a finished session into entries worth
// remembering, each with a category (SPEC A3): file_pattern, user_pref,
// error_solution or general.
//
// Two implementations share the Extractor interface. LLMExtractor asks a model
// (prompt.tmpl, reply checked against schema.json); Rules is the offline default,
// used when no endpoint is configured. Callers check ShouldExtract first: an empty
// or system-only conversation costs no model call.
//
// # The rules
//
// Entries are tidied: single spaces, a capital first letter unless the first
// word is code ("read_csv", "df.groupby", "kubectl -n prod", a word in
// backticks keep their case; textnorm.UpperFirst).
//
// Rules reads English, and Chinese and German for the three structured categories
// (files, preferences, errors; see "Chinese and German" below). It splits each
// message into sentences (at line breaks, at . ! ? followed by a space, and at
// 。！？; lines inside ``` fences are code) and never looks at system messages. Any role other than assistant, tool and system is taken
// as a human speaker. Its output is deterministic, in order of first evidence, with
// identical contents (ignoring case and spacing) kept once.
//
// File and table structures (file_pattern). Sources are user and tool messages;
// assistant messages are not, so an assistant repeating the user's columns adds
// nothing. A subject is a file name with a data extension (.csv .tsv .xlsx .xls
// .json .parquet) or a phrase such as "my sales files" or "the orders table". A
// generic phrase ("the file", "this data", "the uploaded file") means the subject
// named last. Facts found:
//   - column lists after "columns", "fields", "headers" or "column names", optionally
//     with "are", "include", "named", ... and a colon: "columns date, product, qty",
//     "columns: a, b and c", "has fields id, email"; a type in parentheses, "qty (int)",
//     is kept. A list of one name needs a colon or a verb ("the column is called x"),
//     so "the columns look wrong" lists nothing;
//   - column types in words for a column already listed, "amount is numeric", "date is
//     a date", or for any column when the word column is said, "the column code is text";
//   - row counts, "about 5000 rows", "5,000 rows", "10k rows", "1.5 million records",
//     pandas' "shape: (5000, 5)" and "RangeIndex: 5000 entries"; "the first 10 rows",
//     "deleted 3 rows" and similar are not counts;
//   - sheet names: "sheets Jan, Feb and Mar", "a sheet called Summary", "the 'Q1 2024'
//     sheet", "the Summary tab".
//
// A data file a user names (a file name with a data extension) is kept even when
// nothing of its structure is said ("I saved it as customers_q3.parquet" gives
// "customers_q3.parquet: a file the user works with, structure not stated"); a
// file a tool names is not, since a listing names files nobody works with.
// A fact belongs to the subject named closest before it in its sentence, else the
// first one after it, else the subject in discussion, else "table". All facts about
// one subject merge into one entry, such as
// "sales.csv: columns date (date), product, qty (int); about 5000 rows; sheets Jan".
// A later row count replaces an earlier one (a tool's exact count corrects a user's
// estimate). Limits: a column name has at most three words and must not start with a
// word like "the" or "on"; a list ends at the first word that starts a new clause
// ("with", "which", "in", "for", ...); type listings such as pandas' dtypes are not read.
//
// Preferences (user_pref). Only user sentences that are not questions. Strong
// markers suffice: "I prefer …", "I'd rather …", "I like … better", "please always
// …", "always …" (imperative), "from now on …", "by default …", "use … format",
// "format dates as …", "I want charts as …", "don't/never/avoid use …", "keep answers
// short", "be concise", "answer in German", "no emojis", "skip the intro", "short
// answers please". Weak markers ("I like", "I hate", "I usually", "my favourite")
// need a topic word (chart, format, decimals, answers, font, ...); a chart style
// (bar, line, pie, ...) needs a habit word (prefer, always, default, ...); a format
// specification (YYYY-MM-DD, ISO 8601, decimal places, thousands separators) needs
// an imperative (use, show, format, ...) or a habit word. A marker whose object is
// only a pronoun ("I prefer that", "don't use it") is chit-chat. The entry is the
// sentence as said, less openers like "Oh and,". Limits: a preference inside a
// question ("I prefer bars, can you redo it?") is missed; one-off requests with a
// strong marker ("use CSV format for this export") are taken as preferences.
//
// A suggestion turned down for an alternative: when the assistant suggests or
// offers something (a question, "how about", "I'd suggest", "shall I", "soll
// ich", "要不要", "ましょうか", "할까요") and the user's reply opens with a "no"
// ("no", "nope", "nein", "不，", "いいえ、", "아니요,") followed by something named,
// that alternative is the preference: "No, a stacked bar chart please" gives "A
// stacked bar chart please (preferred to the assistant's suggestion)". The
// suggestion is never kept; a "no" with nothing in its place ("no thanks, that's
// fine"), a question, a negation or an error report gives nothing.
//
// Errors and fixes (error_solution). An error is a user or tool sentence with a
// Traceback's exception line or a sign such as "KeyError", "Error:", "Exception",
// "failed with", "not found", "I get an error", or an Excel error (#VALUE!, #REF!,
// #N/A, #DIV/0!, #NAME?, #NUM!, #NULL!, #SPILL!, #CALC!); the newest one is pending.
// It is resolved by a user or assistant sentence stating the fix ("fixed it by …",
// "the fix was …", "solved it by …", "it worked after …"), which may follow the error
// in the same sentence, or by a user sentence confirming the assistant's last reply
// ("that worked", "thanks, it works", "works now", "runs fine now", "Fixed!",
// "problem solved") without a negation ("that didn't work" resolves nothing),
// or saying the error is gone ("no more errors", "kein Fehler mehr", "没有报错了",
// "エラーが出なくなった", "에러가 안 나요") unless it is back ("still", "again"). The fix taken from an assistant
// reply is the whole reply that was confirmed (the last one before the
// confirmation: a suggestion the user rejected, "that didn't work", is replaced by
// the next), its questions and pleasantries ("Sure!", "Hope this helps") left out,
// its code lines kept, at most 500 characters: a fix is often a cause, a step and
// its code. The entry reads "Error: <error>. Fix: <fix>". Limits: an error never
// resolved gives no entry; a fix shown only by a tool succeeding on a retry is not
// recognised; a confirmation that also says "not" or "still" is not taken as one.
//
// Explicit requests to remember (general, or the specific category). A user
// sentence starting with "remember that …", "remember: …", "don't forget …", "keep in
// mind …", "for future reference, …", "note that I/my/we …", or containing "please
// remember …" (also in a polite question) keeps the remembered text. If that text
// is a preference it becomes user_pref; if it describes a file the file rule already
// holds it; else it is general. "I don't remember …" and "Remember the file I sent?"
// are not requests. Limits: "remember this." followed by the fact in the next
// sentence keeps nothing.
//
// Chinese and German. Files: a subject is a file name, a Chinese noun ending in
// 表, 表格, 文件 or 工作簿 ("销售表", "库存文件"; 工作表 is a sheet), or a German one
// ending in -datei, -tabelle or -mappe ("die Lagerdatei"); columns are listed after
// 列, 字段, 列名 or 表头 and a colon, separated by 、，和 ("字段：sku 是文本、数量是整数"
// keeps the types), or after "Spalten"/"Felder" as in English ("hat die Spalten
// Datum, Filiale und Betrag"); sheets after 工作表 and a colon or after
// "Blätter"/"Tabellenblätter"; types also as "die Spalte menge ist eine Ganzzahl";
// row counts "大约 8000 行", "1.2 万条记录", "etwa 9.000 Zeilen" ("前 10 行", "die
// ersten 10 Zeilen" are not counts). Types, qualifiers and "rows" are written in
// English in the entry, so one file reads the same in every language.
// Preferences: a strong marker (以后, 今后, 我更喜欢, 我习惯, 请始终; "ich bevorzuge",
// "von nun an", "künftig", "standardmäßig", "halte die Antworten kurz", "antworte
// auf Deutsch", "keine …") or a weak one (一律, 总是, 默认, 统一, 尽量, 不要;
// "immer", "normalerweise", "meistens", "lieber") with a topic word (回答, 格式, 图,
// 日期, 小数, 字体, 代码, 语言; Diagramm, Format, Antwort, Datum, Nachkomma, Python,
// Code, Sprache, …, found inside compounds); a sentence reporting an error is never
// one. Errors: the signs above, and 报错, 错误, 出错, 失败, "Fehler", "funktioniert
// nicht", Excel's German #NV, #WERT!, #BEZUG!, #ZAHL!; confirmations 可以了, 好了,
// 成功了, 解决了, "hat funktioniert", "hat geklappt", "klappt", "jetzt geht/läuft",
// "Problem gelöst", "läuft", and in Japanese and Korean 直りました, 解決しました,
// 해결됐어요, 잘 돼요, not with a negation (不, 没, 还是; "nicht", "kein", "immer noch").
//
// Everything else — greetings, thanks, questions without facts, small talk — gives
// no entry.
package extract
