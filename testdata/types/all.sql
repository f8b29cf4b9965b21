-- Every other built-in type, arrays of each, domains and extension types.
-- Rows: 1 typical, 2 awkward/extreme, 3 all NULL, 4 empty arrays and
-- empty strings, 5 arrays with NULL elements.
CREATE EXTENSION IF NOT EXISTS citext;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy 😀', 'with,comma');
CREATE TYPE pair AS (a int, b text);
CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
CREATE DOMAIN price AS numeric(12,2);
CREATE DOMAIN shorttext AS varchar(10);
CREATE TABLE alltypes (
  id        int PRIMARY KEY,
  tm        time,
  tmtz      timetz,
  iv        interval,
  mn        money,
  ip        inet,
  cr        cidr,
  mac       macaddr,
  mac8      macaddr8,
  bt        bit(4),
  vb        varbit,
  en        mood,
  cp        pair,
  rg        int4range,
  tsr       tstzrange,
  mr        int4multirange,
  ci        citext,
  x         xml,
  ch        "char",
  o         oid,
  pt        point,
  tsv       tsvector,
  d_pos     posint,
  d_price   price,
  d_text    shorttext,
  n_any     numeric,
  n_wide    numeric(50,10),
  a_i2      smallint[],
  a_i4      integer[],
  a_i8      bigint[],
  a_f4      real[],
  a_f8      double precision[],
  a_b       boolean[],
  a_t       text[],
  a_vc      varchar(5)[],
  a_bc      char(3)[],
  a_n       numeric(10,2)[],
  a_n38     numeric(38,6)[],
  a_nany    numeric[],
  a_d       date[],
  a_ts      timestamp[],
  a_tstz    timestamptz[],
  a_u       uuid[],
  a_by      bytea[],
  a_j       json[],
  a_jb      jsonb[],
  a_en      mood[],
  a_ip      inet[],
  a_iv      interval[],
  a_tm      time[],
  a_mn      money[],
  a_cp      pair[],
  a_price   price[]
);
INSERT INTO alltypes VALUES
(1, '13:14:15.123456', '13:14:15+05:30', '1 year 2 months 3 days 04:05:06.5', '1234.56',
 '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05', B'1010', B'101',
 'happy 😀', ROW(1, 'x,y "z"'), '[1,10)', '[2024-01-01 00:00:00+00,2024-02-01 00:00:00+00)', '{[1,3), [5,7)}',
 'MixedCase', '<a x="1">t</a>', 'c', 4294967295, '(1.5,-2)', 'the quick brown fox',
 7, 1234.5, 'short', 3.14159265358979323846264338327950288419716939937510, 1234567890123456789012345678901234567890.0123456789,
 '{1,-32768,32767}', '{1,2,3}', '{9223372036854775807,-9223372036854775808}', '{1.5,NaN,-Infinity}', '{2.25,1e308,-0}',
 '{true,false}', '{"a","b,c","d\"e","f\\g","NULL",""}', '{ab,cd}', '{a,bc}', '{1.25,-99999999.99}',
 '{12345678901234567890123456789012.123456,-0.000001}', '{1.5,NaN,Infinity}',
 '{2024-02-29,infinity,-infinity}', '{"2024-02-29 01:02:03.5","infinity"}', '{"2024-02-29 01:02:03.5+00","-infinity"}',
 '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}', '{"\\x00ff","\\x"}', ARRAY['{"a":1}'::json, '[1, 2]'], ARRAY['{"b": 2}'::jsonb],
 '{sad,"with,comma"}', '{127.0.0.1,::1}', '{"1 day","-1 hours -2 minutes"}', '{00:00:00,24:00:00}', '{1.5,-2}',
 ARRAY[ROW(1,'a')::pair, ROW(NULL,NULL)::pair], '{1.50,2}');
-- Scalars only; the arrays of rows 2 and 4 are filled below.
INSERT INTO alltypes (id, tm, tmtz, iv, mn, ip, cr, mac, mac8, bt, vb, en, cp, rg, tsr, mr, ci, x, ch, o, pt, tsv,
  d_pos, d_price, d_text, n_any, n_wide) VALUES
(2, '24:00:00', '00:00:00-12:34:56', '-1 years -2 months +3 days -04:05:06.000001', '-92233720368547758.08',
 '::ffff:1.2.3.4', '2001:db8::/32', 'ff:ff:ff:ff:ff:ff', '00:00:00:00:00:00:00:00', B'0000', B'',
 'with,comma', ROW(NULL, ''), 'empty', '(,)', '{}',
 '', '', '\', 0, '(0,0)', '',
 2147483647, -9999999999.99, '', 'NaN', -9999999999999999999999999999999999999999.9999999999),
(4, '00:00:00', '23:59:59.999999+14', '0', '0', '0.0.0.0/0', '0.0.0.0/0', '00:00:00:00:00:00', '00:00:00:00:00:00:00:00', B'1111', B'1',
 'sad', ROW(0, E'tab\tnl\n'), '[-2147483648,2147483647)', '[-infinity,infinity]', '{[1,2)}',
 'ü', '', 'x', 1, '(1e+300,-1e-300)', 'a:1 b:2',
 1, 0, 'ü', 'Infinity', 0);
INSERT INTO alltypes (id) VALUES (3);
INSERT INTO alltypes (id, tm, tmtz, iv, mn, n_any, a_t, a_iv) VALUES
(5, '12:00:00.000001', '12:00:00.5-00:30', '-0.000001 seconds', '0.01', '-Infinity',
 '{"日本語 🎉","tab\there"}', '{"1 mon -1 days","P1Y2M3DT4H5M6.789S"}');
-- Row 2: every array empty. Row 4: every array a single NULL element.
DO $$
DECLARE c text;
BEGIN
  FOR c IN SELECT attname FROM pg_attribute WHERE attrelid = 'alltypes'::regclass AND attname LIKE 'a\_%' LOOP
    EXECUTE format('UPDATE alltypes SET %I = ''{}'' WHERE id = 2', c);
    EXECUTE format('UPDATE alltypes SET %I = ''{NULL}'' WHERE id = 4', c);
  END LOOP;
END $$;
UPDATE alltypes SET a_i4 = '{NULL,1}', a_i8 = '{1,NULL}', a_t = '{NULL,""}', a_n = '{NULL,0,NULL}' WHERE id = 4;
