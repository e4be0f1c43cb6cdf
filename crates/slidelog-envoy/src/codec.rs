//! The gRPC codec of the rate limit service: protobuf through `prost`, as
//! tonic's own codec, except that a message that does not decode is the
//! caller's fault and answered `INVALID_ARGUMENT` (tonic's codec says
//! `INTERNAL`, which reads as a server bug and is retried by some clients).

use std::marker::PhantomData;
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder};
use tonic_prost::{ProstCodec, ProstDecoder};

/// `prost` encoding; undecodable input is `INVALID_ARGUMENT`.
#[derive(Debug, Clone)]
pub struct RequestCodec<T, U>(ProstCodec<T, U>);

impl<T, U> Default for RequestCodec<T, U> {
    fn default() -> Self {
        Self(ProstCodec::default())
    }
}

impl<T, U> Codec for RequestCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = <ProstCodec<T, U> as Codec>::Encoder;
    type Decoder = StrictDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        self.0.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        StrictDecoder(self.0.decoder(), PhantomData)
    }
}

/// [`ProstDecoder`] with decode failures mapped to `INVALID_ARGUMENT`.
#[derive(Debug)]
pub struct StrictDecoder<U>(ProstDecoder<U>, PhantomData<U>);

impl<U: prost::Message + Default> Decoder for StrictDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf).map_err(|s| {
            Status::invalid_argument(format!(
                "the request is not a valid protobuf message: {}",
                s.message()
            ))
        })
    }

    fn buffer_settings(&self) -> tonic::codec::BufferSettings {
        self.0.buffer_settings()
    }
}
