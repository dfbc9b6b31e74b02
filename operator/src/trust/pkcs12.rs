//! The JDK's truststore: a password-less PKCS#12 file (RFC 7292) of trusted-certificate
//! entries, written as DER by hand. (p12-keystore 0.4 always encrypts the certificates and
//! adds a MAC, both with random salts, so its bytes differ on every write.)
//!
//! PFX { version 3, authSafe = data { SEQUENCE OF ContentInfo = [ data { SafeContents } ] } }
//! with no macData; each SafeBag a certBag (x509Certificate) with two attributes:
//! friendlyName (the alias: the certificate's SHA-256, hex) and the JDK's
//! trustedKeyUsage = anyExtendedKeyUsage, which makes the JDK load it as a trusted
//! certificate entry. The same certificates in the same order give the same bytes.

use super::certs::Certificate;

const TAG_INTEGER: u8 = 0x02;
const TAG_OCTET_STRING: u8 = 0x04;
const TAG_OID: u8 = 0x06;
const TAG_BMP_STRING: u8 = 0x1e;
const TAG_SEQUENCE: u8 = 0x30;
const TAG_SET: u8 = 0x31;
const TAG_EXPLICIT_0: u8 = 0xa0;

/// pkcs7-data.
const OID_DATA: &[u64] = &[1, 2, 840, 113549, 1, 7, 1];
/// pkcs-12 certBag.
const OID_CERT_BAG: &[u64] = &[1, 2, 840, 113549, 1, 12, 10, 1, 3];
/// pkcs-9 x509Certificate (certBag type).
const OID_X509_CERTIFICATE: &[u64] = &[1, 2, 840, 113549, 1, 9, 22, 1];
/// pkcs-9 friendlyName.
const OID_FRIENDLY_NAME: &[u64] = &[1, 2, 840, 113549, 1, 9, 20];
/// Oracle's trustedKeyUsage attribute (the JDK's PKCS12KeyStore).
const OID_TRUSTED_KEY_USAGE: &[u64] = &[2, 16, 840, 1, 113894, 746875, 1, 1];
/// anyExtendedKeyUsage.
const OID_ANY_EXTENDED_KEY_USAGE: &[u64] = &[2, 5, 29, 37, 0];

/// The truststore holding `certs`, in order, each a trusted-certificate entry.
pub fn truststore<'a>(certs: impl IntoIterator<Item = &'a Certificate>) -> Vec<u8> {
    let bags: Vec<u8> = certs.into_iter().flat_map(cert_bag).collect();
    let safe_contents = tlv(TAG_SEQUENCE, &bags);
    let authenticated_safe = tlv(TAG_SEQUENCE, &data_content_info(&safe_contents));
    let pfx = [
        tlv(TAG_INTEGER, &[3]),
        data_content_info(&authenticated_safe),
    ]
    .concat();
    tlv(TAG_SEQUENCE, &pfx)
}

/// ContentInfo { pkcs7-data, [0] EXPLICIT OCTET STRING content }.
fn data_content_info(content: &[u8]) -> Vec<u8> {
    let body = [
        oid(OID_DATA),
        tlv(TAG_EXPLICIT_0, &tlv(TAG_OCTET_STRING, content)),
    ]
    .concat();
    tlv(TAG_SEQUENCE, &body)
}

/// SafeBag { certBag, [0] EXPLICIT CertBag, SET OF Attribute }.
fn cert_bag(cert: &Certificate) -> Vec<u8> {
    let bag_value = [
        oid(OID_X509_CERTIFICATE),
        tlv(TAG_EXPLICIT_0, &tlv(TAG_OCTET_STRING, &cert.der)),
    ]
    .concat();
    let attributes = [
        attribute(OID_FRIENDLY_NAME, &bmp_string(&cert.sha256)),
        attribute(OID_TRUSTED_KEY_USAGE, &oid(OID_ANY_EXTENDED_KEY_USAGE)),
    ];
    let body = [
        oid(OID_CERT_BAG),
        tlv(TAG_EXPLICIT_0, &tlv(TAG_SEQUENCE, &bag_value)),
        set_of(&attributes),
    ]
    .concat();
    tlv(TAG_SEQUENCE, &body)
}

/// Attribute { type, SET { value } }.
fn attribute(kind: &[u64], value: &[u8]) -> Vec<u8> {
    tlv(TAG_SEQUENCE, &[oid(kind), tlv(TAG_SET, value)].concat())
}

/// DER SET OF: the elements sorted by their encoding.
fn set_of(elements: &[Vec<u8>]) -> Vec<u8> {
    let mut sorted = elements.to_vec();
    sorted.sort();
    tlv(TAG_SET, &sorted.concat())
}

fn bmp_string(s: &str) -> Vec<u8> {
    let utf16: Vec<u8> = s.encode_utf16().flat_map(u16::to_be_bytes).collect();
    tlv(TAG_BMP_STRING, &utf16)
}

/// An OBJECT IDENTIFIER from its arcs (the first two packed into one, as X.690 says).
fn oid(arcs: &[u64]) -> Vec<u8> {
    let mut body = Vec::new();
    let first = arcs[0] * 40 + arcs[1];
    for arc in std::iter::once(first).chain(arcs[2..].iter().copied()) {
        let mut chunk = vec![(arc & 0x7f) as u8];
        let mut rest = arc >> 7;
        while rest > 0 {
            chunk.push((rest & 0x7f) as u8 | 0x80);
            rest >>= 7;
        }
        body.extend(chunk.iter().rev());
    }
    tlv(TAG_OID, &body)
}

/// Tag, DER length (short or long form), content.
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let len = content.len();
    let mut out = vec![tag];
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(content);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn oids_and_lengths_are_der() {
        assert_eq!(
            oid(OID_TRUSTED_KEY_USAGE),
            unhex("06 0c 60 86 48 01 86 f9 66 ad ca 7b 01 01")
        );
        assert_eq!(oid(OID_ANY_EXTENDED_KEY_USAGE), unhex("06 04 55 1d 25 00"));
        assert_eq!(oid(OID_DATA), unhex("06 09 2a 86 48 86 f7 0d 01 07 01"));
        assert_eq!(tlv(0x04, &[7; 0x7f])[..2], [0x04, 0x7f]);
        assert_eq!(tlv(0x04, &[7; 0x80])[..3], [0x04, 0x81, 0x80]);
        assert_eq!(tlv(0x04, &[7; 0x1234])[..4], [0x04, 0x82, 0x12, 0x34]);
    }

    /// The whole file for one (fake, 5-byte) certificate, assembled by hand from RFC 7292.
    #[test]
    fn one_certificate_gives_exactly_these_bytes() {
        let cert = Certificate {
            der: unhex("30 03 02 01 05"),
            subject: "CN=x".to_owned(),
            sha256: "ab".to_owned(),
            not_before: "2025-01-01T00:00:00Z".parse().unwrap(),
            not_after: "2030-01-01T00:00:00Z".parse().unwrap(),
        };
        let expected = unhex(
            "30 81 80  02 01 03
               30 7b  06 09 2a 86 48 86 f7 0d 01 07 01  a0 6e  04 6c
                 30 6a
                   30 68  06 09 2a 86 48 86 f7 0d 01 07 01  a0 5b  04 59
                     30 57
                       30 55  06 0b 2a 86 48 86 f7 0d 01 0c 0a 01 03
                         a0 17  30 15  06 0a 2a 86 48 86 f7 0d 01 09 16 01
                                       a0 07  04 05  30 03 02 01 05
                         31 2d
                           30 13  06 09 2a 86 48 86 f7 0d 01 09 14  31 06  1e 04 00 61 00 62
                           30 16  06 0c 60 86 48 01 86 f9 66 ad ca 7b 01 01  31 06  06 04 55 1d 25 00",
        );
        assert_eq!(truststore([&cert]), expected);
        assert_eq!(truststore([&cert]), truststore([&cert]));
    }
}
