"""Small templates, each exercising one corner of jinja2, rendered by both
engines in compare_jinja.py. (name, template, variables)."""

V = {"xs": [3, 1, 2], "s": "  Hello, World  ", "d": {"b": 2, "a": 1, "items": "key"},
     "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
              {"role": "tool", "content": "r"}],
     "n": None, "t": True, "f": 1.5, "u8": "héllo wörld 日本"}

CASES = [
    ("text", "plain text\n", {}),
    ("trailing-newlines", "a\n\n", {}),
    ("crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc", {}),
    ("trim-blocks", "{% if true %}\nyes\n{% endif %}\nend", {}),
    ("lstrip-blocks", "x\n    {% if true %}\n    in\n    {% endif %}\ny", {}),
    ("lstrip-not-vars", "x\n    {{ 1 }}\n", {}),
    ("lstrip-text-before", "x  {% if true %}y{% endif %}", {}),
    ("dash-strip", "a   {%- if true -%}   b   {%- endif -%}   c", {}),
    ("dash-vars", "a  {{- 'b' -}}  c", {}),
    ("plus-keeps", "x\n    {%+ if true %}\ny{% endif +%}\nz", {}),
    ("comments", "a {# c #}\n  {#- c2 -#}  b\n{# c3 #}\nc", {}),
    ("raw", "{% raw %}{{ not evaluated }}{% endraw %}!", {}),
    ("for-loop-vars", "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
     "{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}", V),
    ("for-prev-next", "{% for x in xs %}[{{ loop.previtem }},{{ loop.nextitem }}]{% endfor %}", V),
    ("for-else", "{% for x in [] %}x{% else %}empty{% endfor %}", {}),
    ("for-filter", "{% for x in xs if x > 1 %}{{ x }}{{ loop.length }}{% endfor %}", V),
    ("for-break-continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}"
     "{% if x > 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("for-unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", V),
    ("for-dict", "{% for k in d %}{{ k }}{% endfor %}", V),
    ("for-string", "{% for ch in 'abc' %}{{ ch }}-{% endfor %}", {}),
    ("for-scope", "{% set y = 1 %}{% for x in xs %}{% set y = x %}{% endfor %}{{ y }}", V),
    ("loop-cycle", "{% for x in xs %}{{ loop.cycle('a', 'b') }}{% endfor %}", V),
    ("nested-loops", "{% for a in [1,2] %}{% for b in [3,4] %}{{ loop.index }}{{ a }}{{ b }} "
     "{% endfor %}{{ loop.index }}{% endfor %}", {}),
    ("if-elif-else", "{% for v in [1, 2, 3] %}{% if v == 1 %}one{% elif v == 2 %}two"
     "{% else %}many{% endif %}{% endfor %}", {}),
    ("set-block", "{% set b %}inner {{ 1 + 1 }}{% endset %}[{{ b }}]", {}),
    ("set-block-filter", "{% set b | upper %}inner{% endset %}[{{ b }}]", {}),
    ("set-tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}", {}),
    ("namespace", "{% set ns = namespace(n=0, s='') %}{% for x in xs %}{% set ns.n = ns.n + x %}"
     "{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.n }} {{ ns.s }}", V),
    ("macro", "{% macro m(a, b='B', c=none) %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}"
     "{{ m(1) }} {{ m(1, 2) }} {{ m(1, c=3) }}", {}),
    ("macro-scope", "{% set g = 'G' %}{% macro m() %}{{ g }}{% set g = 'L' %}{{ g }}{% endmacro %}"
     "{{ m() }}{{ g }}", {}),
    ("macro-recursion", "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
     "{{ f(5) }}", {}),
    ("call-block", "{% macro wrap(t) %}<{{ t }}>{{ caller() }}</{{ t }}>{% endmacro %}"
     "{% call wrap('b') %}body{% endcall %}", {}),
    ("call-block-args", "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
     "{% call(x) each([1,2]) %}[{{ x }}]{% endcall %}", {}),
    ("filter-block", "{% filter upper %}shout {{ 'it' }}{% endfilter %}", {}),
    ("with", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}", {}),
    ("arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} "
     "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 4 / 2 }} {{ 1.5 + 1 }} {{ -f }}", V),
    ("floats", "{{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.0 }} {{ 1e-5 }} {{ 123456789.0 * 1000000000 }} "
     "{{ 2.5e15 }} {{ 1/3 }}", {}),
    ("compare", "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ true == 1 }} "
     "{{ [1,2] == [1,2] }} {{ none == none }} {{ 'x' != 'y' }}", {}),
    ("in-notin", "{{ 'a' in 'cat' }} {{ 2 in xs }} {{ 'a' in d }} {{ 'z' not in d }} "
     "{{ 'x' in undefined_var }}", V),
    ("logic", "{{ 0 or 'b' }} {{ 1 and 'c' }} {{ not 0 }} {{ none or [] }} {{ '' and x }}", {}),
    ("ternary", "{{ 'y' if t else 'n' }} {{ 'y' if n else 'n' }} [{{ 'y' if n }}]", V),
    ("concat", "{{ 1 ~ 'a' ~ none ~ t ~ xs }}", V),
    ("print-values", "{{ none }} {{ true }} {{ xs }} {{ d }} {{ (1, 'a') }} {{ (1,) }} "
     "{{ ['it\\'s', \"q\\\"\"] }} {{ {'k': [1.0, none, true]} }}", V),
    ("slicing", "{{ xs[::-1] }} {{ xs[1:] }} {{ xs[:-1] }} {{ u8[::-1] }} {{ u8[1:4] }} "
     "{{ xs[-1] }} {{ u8[0] }} {{ xs[10] }}|{{ xs[::2] }}", V),
    ("attr-vs-item", "{{ d.items is callable }}|{{ d['items'] }}|{{ d.a }}|{{ d['b'] }}|{{ d.missing }}|"
     "{{ d.get('a') }}{{ d.get('zz', 'def') }}{{ d.get('zz') }}", V),
    ("string-methods", "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ s.split(',') }}|"
     "{{ s.split() }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ s.upper() }}|"
     "{{ s.lower() }}|{{ 'hello world'.title() }}|{{ 'xyx'.strip('x') }}|"
     "{{ s.startswith('  He') }}{{ s.endswith(('x', '  ')) }}|{{ 'aaa'.replace('a', 'b', 2) }}|"
     "{{ 'abc'.find('c') }}{{ 'abc'.count('b') }}|{{ '-'.join(['a', 'b']) }}|"
     "{{ 'x{}y{}'.format(1, 'z') }}|{{ u8.upper() }}|{{ 'ab\\ncd'.splitlines() }}|"
     "{{ 'hello'.capitalize() }}|{{ '42'.isdigit() }}", V),
    ("filters-str", "{{ s|trim }}|{{ s|upper }}|{{ s|lower }}|{{ s|replace('l', 'L') }}|"
     "{{ 'hello world'|title }}|{{ 'hello'|capitalize }}|{{ xs|join(', ') }}|{{ u8|length }}|"
     "{{ 42|string }}|{{ 'x'|default('d') }}|{{ nope|default('d') }}|{{ ''|default('d', true) }}|"
     "{{ nope|d('dd') }}", V),
    ("filters-list", "{{ xs|first }} {{ xs|last }} {{ xs|length }} {{ xs|sort }} "
     "{{ xs|sort(reverse=true) }} {{ [1, 2, 1, 3]|unique|list }} {{ xs|max }} {{ xs|min }} "
     "{{ xs|sum }} {{ xs|reverse|list }} {{ 'abc'|list }} {{ d|list }} {{ d|items|list }} "
     "{{ d|dictsort }}", V),
    ("filters-on-none", "{{ n|selectattr('type', 'equalto', 'x')|list }}|{{ n|rejectattr('type')|list }}|"
     "{{ n|select|list|length }}|{{ n|reject('none')|list }}|{{ n|map(attribute='a')|list }}|"
     "{{ missing|selectattr('a')|list }}|{{ ''|map('upper')|list }}", V),
    ("filters-attr", "{{ msgs|selectattr('role', 'equalto', 'user')|list }}|"
     "{{ msgs|rejectattr('role', 'eq', 'user')|map(attribute='content')|join(',') }}|"
     "{{ msgs|map(attribute='role')|list }}|{{ msgs|selectattr('content')|list|length }}|"
     "{{ [1, 0, 2]|select|list }}|{{ [1, 2, 3, 4]|select('odd')|list }}|"
     "{{ ['a', 'B']|map('upper')|list }}|{{ msgs|sort(attribute='role')|map(attribute='role')|join }}",
     V),
    ("filters-num", "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} "
     "{{ '2.5'|float }} {{ 3|float }} {{ -3|abs }} {{ 2.567|round(2) }} {{ 2.5|round }} "
     "{{ 3.5|round }} {{ 2.1|round(0, 'ceil') }}", {}),
    ("tojson", "{{ d|tojson }}|{{ xs|tojson(indent=2) }}|{{ d|tojson(sort_keys=true) }}|"
     "{{ u8|tojson }}|{{ {'a': [1, {'b': none}]}|tojson(separators=(',', ':')) }}|"
     "{{ 'q\"\\n\\t'|tojson }}|{{ f|tojson }}|{{ [true, false]|tojson }}|{{ {}|tojson(indent=2) }}|"
     "{{ u8|tojson(ensure_ascii=true) }}|{{ d|tojson(indent='--') }}", V),
    ("tests", "{{ xs is iterable }}{{ xs is sequence }}{{ d is mapping }}{{ s is string }}"
     "{{ 1 is number }}{{ t is boolean }}{{ n is none }}{{ nope is defined }}{{ nope is undefined }}"
     "{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 'a' is in 'abc' }}{{ t is true }}"
     "{{ t is false }}{{ 1 is integer }}{{ f is float }}{{ 'AB' is upper }}{{ 'ab' is lower }}"
     "{{ nope is iterable }}{{ n is iterable }}{{ d is sequence }}{{ 1 is equalto 1 }}"
     "{{ 1 is sameas 1 }}{{ t is sameas true }}{{ xs is not string }}{{ 2 is gt 1 }}", V),
    ("undefined-ok", "[{{ nope }}][{{ nope|length }}][{{ nope|trim }}][{% for x in nope %}x{% endfor %}]"
     "[{{ nope ~ 'a' }}][{{ not nope }}][{{ nope == nope }}][{{ d.missing is defined }}]", V),
    ("undefined-attr-error", "{{ nope.attr }}", {}),
    ("undefined-item-error", "{{ nope['k'] }}", {}),
    ("undefined-add-error", "{{ nope + 1 }}", {}),
    ("none-attr-ok", "[{{ n.attr }}]", V),
    ("type-error", "{{ 'a' + 1 }}", {}),
    ("none-iter-error", "{% for x in n %}{% endfor %}", V),
    ("raise", "{{ raise_exception('bad conversation') }}", {}),
    ("zero-div", "{{ 1 / 0 }}", {}),
    ("markup-concat", "{% set m = '<b>'|safe %}{{ 'a&' + m }}|{{ m + '<i>' }}|{{ 'x' ~ m }}|"
     "{{ ('<' ~ 'y')|safe + '&' }}", {}),
    ("escape", "{{ '<a href=\"x\">&\\''|e }}", {}),
    ("string-escapes", "{{ 'a\\tb\\\\c\\x41\\u00e9\\q' }}|{{ \"it's\" }}|{{ 'a' 'b' }}", {}),
    ("named-escape-error", "{{ '\\N{DASH}' }}", {}),
    ("dict-literal", "{% set x = {'k': 1, 'j': [1, 2]} %}{{ x.k }}{{ x['j'][1] }}{{ x|length }}", {}),
    ("list-methods", "{{ xs.index(1) }}{{ xs.count(3) }}", V),
    ("range", "{{ range(3)|list }}{{ range(1, 10, 3)|list }}{{ range(5, 0, -2)|list }}", {}),
    ("range-too-big", "{% for i in range(2**31) %}{% endfor %}", {}),
    ("dict-global", "{{ dict(a=1, b='x') }}", {}),
    ("indent", "{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|"
     "{{ 'a\\n\\nb'|indent(blank=true) }}", {}),
    ("loop-controls-nested", "{% for a in [1, 2, 3] %}{% for b in [1, 2, 3] %}{% if b == 2 %}"
     "{% break %}{% endif %}{{ a }}{{ b }} {% endfor %}{% endfor %}", {}),
    ("is-test-precedence", "{{ not nope is defined }} {{ xs|length > 2 }} {{ 1 + xs|length }}", V),
    ("unknown-filter", "{{ 1|nosuchfilter }}", {}),
    ("unknown-tag", "{% nosuchtag %}", {}),
    ("unterminated-block", "{% if true %}open", {}),
    ("unterminated-var", "{{ 1 + ", {}),
    ("unterminated-comment", "{# open", {}),
    ("bad-syntax", "{{ 1 + * 2 }}", {}),
    ("stray-end", "{% endif %}", {}),
    ("break-outside-loop", "{% break %}", {}),
    ("macro-too-many-args", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", {}),
    ("format-op", "{{ '%s-%d' % ('a', 3) }} {{ '%s'|format('z') }}", {}),
    ("format-op-float-d", "{{ '%d|%d|%i' % (-3.9, 7.9e20, 1e300) }} {{ 9.2e18|string }} {{ -9.2e18|int }}", {}),
    ("map-default", "{{ msgs|map(attribute='name', default='anon')|list }}", V),
    ("strftime", "{{ strftime_now('%Y') | length }}", {}),
    ("nested-namespace-loop", "{% set ns = namespace(found=false) %}{% for m in msgs %}"
     "{% if m.role == 'tool' %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }}", V),
    ("messages-reverse-index", "{% for m in msgs[::-1] %}{{ (msgs|length - 1) - loop.index0 }}"
     "{{ m.role[0] }}{% endfor %}", V),
    ("items-filter-undefined", "[{% for k, v in nope|items %}x{% endfor %}]", {}),
    ("unicode-title", "{{ 'ÉCOLE élève'|lower }}|{{ 'straße'|upper }}|{{ 'élan vital'|title }}", {}),
]
