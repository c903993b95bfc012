//! serde plumbing shared by the text [`Serializer`](super::Serializer), the serializer that
//! builds a [`Value`](crate::Value), and the serializers that accept only a few shapes (map
//! keys, a tensor's fields): methods that are another method of the same serializer, the
//! compound traits that all call one `element`, `field` and `finish`, and refusals.

/// The `Serializer` methods that are another method of the same serializer: integers go
/// through `serialize_i64` (those that can exceed it range-checked first), a `char` is a
/// string, `Some(x)` is `x`, a unit struct is `()`, a unit variant its name, tuples are
/// sequences and structs are maps.
macro_rules! serializer_aliases {
    () => {
        $crate::ser::forward::serializer_aliases! {
            lossless: serialize_i8(i8), serialize_i16(i16), serialize_i32(i32),
                serialize_u8(u8), serialize_u16(u16), serialize_u32(u32);
            checked: serialize_i128(i128), serialize_u64(u64), serialize_u128(u128);
        }

        fn serialize_char(self, value: char) -> $crate::error::Result<Self::Ok> {
            ::serde::ser::Serializer::serialize_str(self, value.encode_utf8(&mut [0; 4]))
        }

        fn serialize_some<T: ::serde::Serialize + ?Sized>(
            self,
            value: &T,
        ) -> $crate::error::Result<Self::Ok> {
            value.serialize(self)
        }

        fn serialize_unit_struct(self, _name: &'static str) -> $crate::error::Result<Self::Ok> {
            ::serde::ser::Serializer::serialize_unit(self)
        }

        fn serialize_unit_variant(
            self,
            _name: &'static str,
            _index: u32,
            variant: &'static str,
        ) -> $crate::error::Result<Self::Ok> {
            ::serde::ser::Serializer::serialize_str(self, variant)
        }

        fn serialize_tuple(self, len: usize) -> $crate::error::Result<Self::SerializeTuple> {
            ::serde::ser::Serializer::serialize_seq(self, Some(len))
        }

        fn serialize_tuple_struct(
            self,
            _name: &'static str,
            len: usize,
        ) -> $crate::error::Result<Self::SerializeTupleStruct> {
            ::serde::ser::Serializer::serialize_seq(self, Some(len))
        }

        fn serialize_struct(
            self,
            _name: &'static str,
            len: usize,
        ) -> $crate::error::Result<Self::SerializeStruct> {
            ::serde::ser::Serializer::serialize_map(self, Some(len))
        }
    };
    (
        lossless: $($lossless:ident($small:ty)),*;
        checked: $($checked:ident($large:ty)),*;
    ) => {
        $(
            fn $lossless(self, value: $small) -> $crate::error::Result<Self::Ok> {
                ::serde::ser::Serializer::serialize_i64(self, value.into())
            }
        )*
        $(
            fn $checked(self, value: $large) -> $crate::error::Result<Self::Ok> {
                let int = i64::try_from(value)
                    .map_err(|_| $crate::error::Error::int_out_of_range(value))?;
                ::serde::ser::Serializer::serialize_i64(self, int)
            }
        )*
    };
}

/// `SerializeSeq`, `SerializeTuple`, `SerializeTupleStruct` and `SerializeTupleVariant` for
/// `$type`, whose own `element(&mut self, &T)` adds an item and `finish(self)` closes it.
macro_rules! list_impls {
    ($type:ty => $ok:ty) => {
        $crate::ser::forward::list_impls!(@one $type => $ok, SerializeSeq::serialize_element);
        $crate::ser::forward::list_impls!(@one $type => $ok, SerializeTuple::serialize_element);
        $crate::ser::forward::list_impls!(@one $type => $ok, SerializeTupleStruct::serialize_field);
        $crate::ser::forward::list_impls!(@one $type => $ok, SerializeTupleVariant::serialize_field);
    };
    (@one $type:ty => $ok:ty, $trait:ident::$method:ident) => {
        impl ::serde::ser::$trait for $type {
            type Ok = $ok;
            type Error = $crate::error::Error;

            fn $method<T: ::serde::Serialize + ?Sized>(
                &mut self,
                value: &T,
            ) -> $crate::error::Result<()> {
                self.element(value)
            }

            fn end(self) -> $crate::error::Result<$ok> {
                self.finish()
            }
        }
    };
}

/// `SerializeStruct` and `SerializeStructVariant` for `$type`, whose own
/// `field(&mut self, &'static str, &T)` adds an entry and `finish(self)` closes it.
macro_rules! struct_impls {
    ($type:ty => $ok:ty) => {
        $crate::ser::forward::struct_impls!(@one $type => $ok, SerializeStruct);
        $crate::ser::forward::struct_impls!(@one $type => $ok, SerializeStructVariant);
    };
    (@one $type:ty => $ok:ty, $trait:ident) => {
        impl ::serde::ser::$trait for $type {
            type Ok = $ok;
            type Error = $crate::error::Error;

            fn serialize_field<T: ::serde::Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> $crate::error::Result<()> {
                self.field(key, value)
            }

            fn end(self) -> $crate::error::Result<$ok> {
                self.finish()
            }
        }
    };
}

/// `Serializer` methods that refuse what they are given with `$error(what)`, one per line:
/// `method(argument types) -> ok type => what`, generic ones as `method<T>(…)`.
macro_rules! refuse {
    ($error:path; $(
        $method:ident $(<$generic:ident>)? ($($arg:ty),*) -> $ok:ty => $what:expr;
    )*) => {$(
        fn $method$(<$generic: ::serde::Serialize + ?Sized>)?(
            self,
            $(_: $arg),*
        ) -> $crate::error::Result<$ok> {
            Err($error($what))
        }
    )*};
}

pub(crate) use {list_impls, refuse, serializer_aliases, struct_impls};
